#include "runtime/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>

namespace tlt::io {
namespace {

// A name no other writer uses: another process, or another thread of this one, may be writing
// the same path at this moment.
std::string temporary_name(const std::string& path) {
  static std::atomic<uint64_t> serial{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
}

Status sync_file(const std::string& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Unavailable(file + ": cannot reopen to sync: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::Unavailable(file + ": sync failed: " + std::strerror(err));
  return Status::Ok();
}

Status write_temporary(const std::string& tmp, const std::string& path,
                       const std::function<Status(std::ostream&)>& write) {
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) {
    return Status::Unavailable(tmp + ": cannot create (" + std::strerror(errno) +
                               "); check that the directory exists and is writable");
  }
  try {
    TLT_RETURN_IF_ERROR(write(f));
  } catch (const std::exception& e) {
    return Status::Internal(path + ": writing failed: " + e.what());
  }
  f.close();
  if (!f) return Status::Unavailable(tmp + ": write failed (disk full?)");
  return Status::Ok();
}

}  // namespace

Status atomic_write(const std::string& path, const std::function<Status(std::ostream&)>& write,
                    Sync sync) {
  std::string tmp = temporary_name(path);
  Status st = write_temporary(tmp, path, write);
  if (st.ok() && sync == Sync::kData) st = sync_file(tmp);
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::Unavailable(path + ": cannot rename " + tmp + " into place: " +
                             std::strerror(errno));
  }
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

Status atomic_write(const std::string& path, std::string_view bytes, Sync sync) {
  return atomic_write(
      path,
      [&](std::ostream& out) {
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        return Status::Ok();
      },
      sync);
}

}  // namespace tlt::io
