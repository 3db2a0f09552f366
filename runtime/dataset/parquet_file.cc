// A Parquet file's rows through the C ABI of runtime/dataset/src/lib.rs (the `parquet` crate).
#include <algorithm>
#include <mutex>

#include "runtime/dataset/row_file.h"

extern "C" {
struct TltParquet;
TltParquet* tlt_pq_open(const uint8_t* path, size_t len, char** error, size_t* error_len);
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
  ParquetFile(std::string path, TltParquet* pq) : path_(std::move(path)), pq_(pq) {}
  ~ParquetFile() override { tlt_pq_free(pq_); }
  uint64_t rows() const override { return tlt_pq_rows(pq_); }
  StatusOr<std::string> text(uint64_t i) const override;
  std::string where(uint64_t i) const override { return path_ + ": row " + std::to_string(i + 1); }
  Status scan(uint64_t first, const RowVisitor& visit);

 private:
  // Row group g's rows as JSON lines (start offsets into `text`).
  struct Group {
    uint64_t index = UINT64_MAX;
    std::string text;
    std::vector<size_t> starts;  // one past the last: text.size()
  };
  Status read_group(uint64_t g, Group* out) const;

  std::string path_;
  TltParquet* pq_;
  mutable std::mutex mu_;
  mutable Group cached_;  // guarded by mu_
};

Status ParquetFile::read_group(uint64_t g, Group* out) const {
  char *buf = nullptr, *err = nullptr;
  size_t len = 0, err_len = 0;
  if (!tlt_pq_group_json(pq_, g, &buf, &len, &err, &err_len))
    return Status::InvalidArgument(path_ + ": row group " + std::to_string(g) + ": " +
                                   take(err, err_len));
  out->index = g;
  out->text = take(buf, len);
  out->starts.clear();
  for (size_t at = 0; at < out->text.size();) {
    out->starts.push_back(at);
    size_t nl = out->text.find('\n', at);
    at = nl == std::string::npos ? out->text.size() : nl + 1;
  }
  out->starts.push_back(out->text.size());
  uint64_t want = tlt_pq_group_start(pq_, g + 1) - tlt_pq_group_start(pq_, g);
  if (out->starts.size() - 1 != want)
    return Status::InvalidArgument(path_ + ": row group " + std::to_string(g) + " has " +
                                   std::to_string(out->starts.size() - 1) + " rows, its footer " +
                                   std::to_string(want));
  return Status::Ok();
}

Status ParquetFile::scan(uint64_t first, const RowVisitor& visit) {
  Group group;
  uint64_t index = 0;
  for (uint64_t g = 0; g < tlt_pq_groups(pq_); ++g) {
    TLT_RETURN_IF_ERROR(read_group(g, &group));
    for (size_t r = 0; r + 1 < group.starts.size(); ++r, ++index) {
      const char* s = group.text.data() + group.starts[r];
      size_t n = group.starts[r + 1] - group.starts[r] - 1;  // without its '\n'
      StatusOr<nlohmann::json> row = parse_row(s, n);
      if (!row.ok()) return Status::InvalidArgument(where(index) + ": " + row.status().message());
      if (!visit) continue;
      Status v = visit(first + index, *row);
      if (!v.ok()) return Status(v.code(), where(index) + ": " + v.message());
    }
  }
  return Status::Ok();
}

StatusOr<std::string> ParquetFile::text(uint64_t i) const {
  uint64_t groups = tlt_pq_groups(pq_), g = 0;
  while (g + 1 < groups && tlt_pq_group_start(pq_, g + 1) <= i) ++g;
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_.index != g) {
    Status s = read_group(g, &cached_);
    if (!s.ok()) {
      cached_.index = UINT64_MAX;
      return s;
    }
  }
  size_t r = size_t(i - tlt_pq_group_start(pq_, g));
  return cached_.text.substr(cached_.starts[r], cached_.starts[r + 1] - cached_.starts[r] - 1);
}

}  // namespace

StatusOr<std::unique_ptr<RowFile>> open_parquet(const std::string& path, uint64_t first,
                                                const RowVisitor& visit) {
  char* err = nullptr;
  size_t err_len = 0;
  TltParquet* pq =
      tlt_pq_open(reinterpret_cast<const uint8_t*>(path.data()), path.size(), &err, &err_len);
  if (!pq) return Status::InvalidArgument(path + ": not a Parquet file: " + take(err, err_len));
  auto f = std::make_unique<ParquetFile>(path, pq);
  TLT_RETURN_IF_ERROR(f->scan(first, visit));
  return std::unique_ptr<RowFile>(std::move(f));
}

}  // namespace tlt::dataset
