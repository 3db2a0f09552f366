// A Parquet file's rows through the C ABI of runtime/dataset/src/lib.rs (the `parquet` crate).
// open_parquet decodes each row group once, checks its rows, and spools their JSON text to an
// unlinked temporary file (TMPDIR) indexed like a JSONL file, so that rows read in any order
// (a shuffled epoch) cost one pread each, not a row group's decoding.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "runtime/dataset/row_file.h"

extern "C" {
struct TltParquet;
TltParquet* tlt_pq_open_fd(int fd, char** error, size_t* error_len);  // takes fd
uint64_t tlt_pq_rows(const TltParquet* p);
uint64_t tlt_pq_groups(const TltParquet* p);
uint64_t tlt_pq_group_start(const TltParquet* p, uint64_t g);
bool tlt_pq_group_json(const TltParquet* p, uint64_t g, char** out, size_t* out_len, char** error,
                       size_t* error_len);
void tlt_pq_free(TltParquet* p);
void tlt_pq_free_bytes(char* ptr, size_t len);
}

namespace tlt::dataset {
namespace {

// Takes ownership of a buffer the crate returned.
std::string take(char* ptr, size_t len) {
  std::string s(ptr ? ptr : "", ptr ? len : 0);
  tlt_pq_free_bytes(ptr, len);
  return s;
}

class ParquetFile : public RowFile {
 public:
  explicit ParquetFile(std::string path) : path_(std::move(path)) {}
  ~ParquetFile() override {
    if (spool_) std::fclose(spool_);
  }
  uint64_t rows() const override { return rows_.size(); }
  StatusOr<std::string> text(uint64_t i) const override;
  std::string where(uint64_t i) const override { return path_ + ": row " + std::to_string(i + 1); }
  Status scan(TltParquet* pq, DatasetRead& read, uint64_t size);

 private:
  struct Row {
    uint64_t offset;  // in the spool
    uint64_t length;
  };
  Status take_group(TltParquet* pq, uint64_t g, DatasetRead& read, uint64_t size);

  std::string path_;
  std::FILE* spool_ = nullptr;  // the rows' JSON text, one after another (deleted on close)
  uint64_t spooled_ = 0;
  std::vector<Row> rows_;
};

// Row group g's rows (those before the read is full); `size` is the file's bytes, which its rows
// share evenly in the progress reported.
Status ParquetFile::take_group(TltParquet* pq, uint64_t g, DatasetRead& read, uint64_t size) {
  char *buf = nullptr, *err = nullptr;
  size_t len = 0, err_len = 0;
  if (!tlt_pq_group_json(pq, g, &buf, &len, &err, &err_len))
    return Status::InvalidArgument(path_ + ": row group " + std::to_string(g) + ": " +
                                   take(err, err_len));
  std::string text = take(buf, len);
  uint64_t want = tlt_pq_group_start(pq, g + 1) - tlt_pq_group_start(pq, g), got = 0;
  const uint64_t n_rows = std::max<uint64_t>(1, tlt_pq_rows(pq));
  for (size_t at = 0; at < text.size(); ++got) {
    if (read.full()) {
      complete_ = false;
      return Status::Ok();
    }
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    uint64_t index = rows_.size();
    StatusOr<nlohmann::json> row = parse_row(text.data() + at, nl - at, where(index));
    if (!row.ok()) return row.status();
    if (std::fwrite(text.data() + at, 1, nl - at, spool_) != nl - at)
      return Status::Unavailable(
          path_ + ": writing its rows to a temporary file (TMPDIR): " + std::strerror(errno));
    rows_.push_back({spooled_, nl - at});
    spooled_ += nl - at;
    at = nl + 1;
    if (read.visit()) {
      Status v = read.visit()(read.rows(), *row);
      if (!v.ok()) return Status(v.code(), where(index) + ": " + v.message());
    }
    read.took_row(path_, size / n_rows * rows_.size(), size);
  }
  if (got != want)
    return Status::InvalidArgument(path_ + ": row group " + std::to_string(g) + " has " +
                                   std::to_string(got) + " rows, its footer " +
                                   std::to_string(want));
  return Status::Ok();
}

Status ParquetFile::scan(TltParquet* pq, DatasetRead& read, uint64_t size) {
  spool_ = std::tmpfile();
  if (!spool_)
    return Status::Unavailable(
        path_ + ": no temporary file for its rows (TMPDIR): " + std::strerror(errno));
  rows_.reserve(tlt_pq_rows(pq));
  for (uint64_t g = 0; g < tlt_pq_groups(pq); ++g) {
    if (read.full() && rows_.size() < tlt_pq_rows(pq)) {
      complete_ = false;
      break;
    }
    TLT_RETURN_IF_ERROR(take_group(pq, g, read, size));
  }
  if (std::fflush(spool_) != 0)
    return Status::Unavailable(
        path_ + ": writing its rows to a temporary file (TMPDIR): " + std::strerror(errno));
  return Status::Ok();
}

StatusOr<std::string> ParquetFile::text(uint64_t i) const {
  const Row& r = rows_[size_t(i)];
  std::string s(r.length, '\0');
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = ::pread(fileno(spool_), s.data() + got, s.size() - got, off_t(r.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::Unavailable(
          where(i) + ": reading its spooled row: " + (n < 0 ? std::strerror(errno) : "short read"));
    got += size_t(n);
  }
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<RowFile>> open_parquet(const std::string& path, DatasetRead& read) {
  StatusOr<int> fd = open_regular(path);
  if (!fd.ok()) return fd.status();
  struct stat st;
  uint64_t size = ::fstat(*fd, &st) == 0 ? uint64_t(st.st_size) : 0;
  char* err = nullptr;
  size_t err_len = 0;
  TltParquet* pq = tlt_pq_open_fd(*fd, &err, &err_len);
  if (!pq) return Status::InvalidArgument(path + ": not a Parquet file: " + take(err, err_len));
  auto f = std::make_unique<ParquetFile>(path);
  Status s = f->scan(pq, read, size);
  tlt_pq_free(pq);
  if (!s.ok()) return s;
  return std::unique_ptr<RowFile>(std::move(f));
}

}  // namespace tlt::dataset
