#include "runtime/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace tlt::model {

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(other.data_),
      size_(other.size_),
      mapped_(other.mapped_) {
  other.data_ = nullptr, other.size_ = 0, other.mapped_ = false;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = other.data_, size_ = other.size_, mapped_ = other.mapped_;
    other.data_ = nullptr, other.size_ = 0, other.mapped_ = false;
  }
  return *this;
}

StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::Unavailable(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": is a directory, not a file");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = size_t(st.st_size);
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Status::Unavailable(path + ": cannot map: " + std::strerror(errno));
    }
    f.data_ = static_cast<const uint8_t*>(p);
    f.mapped_ = true;
  }
  ::close(fd);
  return f;
}

void MappedFile::release(const uint8_t* begin, size_t n) const {
  if (!mapped_ || begin < data_ || begin + n > data_ + size_) return;
  uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  uintptr_t first = (uintptr_t(begin) + page - 1) / page * page;
  uintptr_t last = (uintptr_t(begin) + n) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

StatusOr<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": no such file");
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace tlt::model
