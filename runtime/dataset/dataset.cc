#include "runtime/dataset/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "api/json_bounded.h"
#include "runtime/clock.h"
#include "runtime/dataset/row_file.h"

namespace tlt::dataset {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool is_jsonl(const std::string& p) {
  return has_suffix(p, ".jsonl") || has_suffix(p, ".json");
}
bool is_parquet(const std::string& p) {
  return has_suffix(p, ".parquet");
}

// What a file of mode `mode` (st_mode) is, when it is not a regular file or a directory.
std::string file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

Status not_regular(const std::string& path, mode_t mode) {
  return Status::InvalidArgument(path + ": is " + file_kind(mode) +
                                 ", not a regular file; a dataset is a .jsonl, .json or .parquet "
                                 "file or a directory of them: copy the rows into a regular file "
                                 "and name it");
}

// "PATH: no such file or directory", naming the working directory a relative path was read from.
Status not_found(const std::string& path) {
  std::string where;
  std::error_code ec;
  if (!path.empty() && path[0] != '/') {
    fs::path cwd = fs::current_path(ec);
    if (!ec) where = " (a relative path is read from the working directory, " + cwd.string() + ")";
  }
  return Status::NotFound(path + ": no such file or directory" + where);
}

// An open file descriptor, closed with its owner.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The rows of one JSONL file: byte offset, length and line number of each non-blank line.
class JsonlFile : public RowFile {
 public:
  explicit JsonlFile(std::string path) : path_(std::move(path)) {}
  uint64_t rows() const override { return rows_.size(); }
  StatusOr<std::string> text(uint64_t i) const override;
  std::string where(uint64_t i) const override {
    return path_ + ":" + std::to_string(rows_[size_t(i)].line);
  }
  Status scan(DatasetRead& read);

 private:
  struct Row {
    uint64_t offset;
    uint32_t length;
    uint32_t line;  // 1-based
  };
  Status take_line(const std::string& line, uint64_t offset, uint64_t number, DatasetRead& read);

  std::string path_;
  Fd fd_;
  uint64_t size_ = 0;  // the file's bytes when it was opened
  std::vector<Row> rows_;
};

// What a first line that is not a JSON object says when the file is the usual JSON dump (one
// array, or pretty-printed objects) rather than JSON Lines; "" otherwise.
std::string json_lines_hint(const std::string& path, std::string_view line) {
  size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
  std::string_view t = line.substr(b, e - b + 1);
  std::string jsonl =
      has_suffix(path, ".json") ? path.substr(0, path.size() - 5) + ".jsonl" : path + ".jsonl";
  if (t.front() == '[')
    return "; this looks like a JSON array: tlt reads JSON Lines, one object per line; convert "
           "it with `jq -c '.[]' " +
           path + " > " + jsonl + "`";
  if (t == "{")
    return "; this looks like pretty-printed JSON: tlt reads JSON Lines, one object per line; "
           "convert it with `jq -c . " +
           path + " > " + jsonl + "`";
  return "";
}

Status JsonlFile::take_line(const std::string& line, uint64_t offset, uint64_t number,
                            DatasetRead& read) {
  std::string place = path_ + ":" + std::to_string(number);
  size_t end = line.size();
  if (end > 0 && line[end - 1] == '\r') --end;                                    // CRLF files
  if (line.find_first_not_of(" \t\r") == std::string::npos) return Status::Ok();  // blank
  size_t bad = 0;
  if (!valid_utf8(line.data(), end, &bad))
    return Status::InvalidArgument(place + ": the line is not UTF-8 (byte " +
                                   std::to_string(bad + 1) + ")");
  if (number > UINT32_MAX)
    return Status::InvalidArgument(place + ": more than 2^32 - 1 lines in one file; split it");
  StatusOr<json> row = parse_row(line.data(), end, place);
  if (!row.ok() && rows_.empty())
    return Status(
        row.status().code(),
        row.status().message() + json_lines_hint(path_, std::string_view(line).substr(0, end)));
  if (!row.ok()) return row.status();
  rows_.push_back({offset, uint32_t(end), uint32_t(number)});
  if (read.visit()) {
    Status s = read.visit()(read.rows(), *row);
    if (!s.ok()) return Status(s.code(), place + ": " + s.message());
  }
  read.took_row(path_, offset + end, size_);
  return Status::Ok();
}

// One streaming pass: a line is gathered up to kMaxLineBytes, then refused; the rest of an
// over-long line is never held. It stops before a row once the read is full.
Status JsonlFile::scan(DatasetRead& read) {
  StatusOr<int> fd = open_regular(path_);
  if (!fd.ok()) return fd.status();
  fd_.fd = *fd;
  struct stat st;
  if (::fstat(fd_.fd, &st) == 0) size_ = uint64_t(st.st_size);
  std::vector<char> buf(1 << 20);
  std::string line;
  uint64_t offset = 0, line_start = 0, number = 1;
  for (;;) {
    ssize_t n = ::read(fd_.fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::InvalidArgument(path_ + ": " + std::strerror(errno));
    if (n == 0) break;
    for (ssize_t k = 0; k < n;) {
      if (read.full()) {
        complete_ = false;
        return Status::Ok();
      }
      const char* nl = static_cast<const char*>(std::memchr(buf.data() + k, '\n', size_t(n - k)));
      ssize_t stop = nl ? nl - buf.data() : n;
      line.append(buf.data() + k, size_t(stop - k));
      offset += uint64_t(stop - k);
      if (line.size() > kMaxLineBytes)
        return Status::InvalidArgument(
            path_ + ":" + std::to_string(number) + ": the line is longer than " +
            std::to_string(kMaxLineBytes >> 20) + " MiB, the limit of a JSONL row");
      k = stop;
      if (!nl) break;
      TLT_RETURN_IF_ERROR(take_line(line, line_start, number, read));
      line.clear();
      ++k, ++offset, ++number;
      line_start = offset;
    }
  }
  if (read.full()) {
    complete_ = line.find_first_not_of(" \t\r") == std::string::npos;
    return Status::Ok();
  }
  return take_line(line, line_start, number, read);
}

StatusOr<std::string> JsonlFile::text(uint64_t i) const {
  const Row& r = rows_[size_t(i)];
  std::string s(r.length, '\0');
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = ::pread(fd_.fd, s.data() + got, s.size() - got, off_t(r.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::InvalidArgument(where(i) + ": the file changed since it was read (" +
                                     (n < 0 ? std::strerror(errno) : "short read") + ")");
    got += size_t(n);
  }
  return s;
}

// The shards of a dataset path in name order: the path itself when it is a file, or a
// directory's entries named like shards. Each must be a regular file (through symlinks); nothing
// is opened here.
StatusOr<std::vector<std::string>> shard_paths(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT ? not_found(path)
                           : Status::InvalidArgument(path + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) {
    if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
    if (!is_jsonl(path) && !is_parquet(path))
      return Status::InvalidArgument(path + ": a dataset file ends in .jsonl, .json or .parquet");
    return std::vector<std::string>{path};
  }
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    std::string p = e.path().string();
    if (!is_jsonl(p) && !is_parquet(p)) continue;
    if (::stat(p.c_str(), &st) != 0)
      return Status::InvalidArgument(p + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return not_regular(p, st.st_mode);
    out.push_back(p);
  }
  if (ec) return Status::InvalidArgument(path + ": " + ec.message());
  if (out.empty())
    return Status::InvalidArgument(path +
                                   ": the directory holds no .jsonl, .json or .parquet "
                                   "shard");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

StatusOr<json> parse_row(const char* s, size_t n, const std::string& where) {
  StatusOr<json> row = api::parse_json_bounded(std::string_view(s, n), where);
  if (!row.ok()) return row.status();
  if (!row->is_object())
    return Status::InvalidArgument(where + ": the row is a JSON " + row->type_name() +
                                   ", not an object");
  return row;
}

StatusOr<int> open_regular(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT ? not_found(path)
                           : Status::InvalidArgument(path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  // O_NONBLOCK: a FIFO swapped in after the stat opens at once instead of waiting for a writer,
  // and fstat of the descriptor itself then refuses it.
  Fd fd;
  fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd.fd < 0)
    return errno == ENOENT ? not_found(path)
                           : Status::InvalidArgument(path + ": " + std::strerror(errno));
  if (::fstat(fd.fd, &st) != 0) return Status::InvalidArgument(path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  int flags = ::fcntl(fd.fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd.fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return Status::InvalidArgument(path + ": " + std::strerror(errno));
  int out = fd.fd;
  fd.fd = -1;
  return out;
}

StatusOr<std::unique_ptr<RowFile>> open_jsonl(const std::string& path, DatasetRead& read) {
  auto f = std::make_unique<JsonlFile>(path);
  TLT_RETURN_IF_ERROR(f->scan(read));
  return std::unique_ptr<RowFile>(std::move(f));
}

using runtime::now_s;

DatasetRead::DatasetRead(const OpenOptions& options, uint64_t total_bytes)
    : options_(options), total_bytes_(total_bytes) {
  if (options_.progress) start_s_ = now_s(), next_s_ = start_s_ + options_.progress_every_s;
}

void DatasetRead::took_row(const std::string& file, uint64_t file_bytes, uint64_t file_size) {
  ++rows_;
  // The clock is read every 1024 rows: a row costs microseconds, so progress stays timely.
  if (!options_.progress || (rows_ & 1023) != 0 || now_s() < next_s_) return;
  next_s_ = now_s() + options_.progress_every_s;
  options_.progress({file, rows_, done_bytes_ + std::min(file_bytes, file_size), total_bytes_});
}

std::string progress_line(const ReadProgress& p) {
  char size[32];
  double gb = double(p.total_bytes) / 1e9;
  if (gb >= 1)
    std::snprintf(size, sizeof size, "%.1f GB", gb);
  else
    std::snprintf(size, sizeof size, "%.0f MB", double(p.total_bytes) / 1e6);
  int percent = p.total_bytes ? int(100.0 * double(p.bytes) / double(p.total_bytes)) : 0;
  return "reading " + p.file + ": " + std::to_string(percent) + "% of " + size + ", " +
         std::to_string(p.rows) + " rows";
}

Dataset::~Dataset() = default;

StatusOr<std::unique_ptr<Dataset>> Dataset::open(const std::string& path, const RowVisitor& visit) {
  OpenOptions options;
  options.visit = visit;
  return open(path, options);
}

StatusOr<std::unique_ptr<Dataset>> Dataset::open(const std::string& path,
                                                 const OpenOptions& options) {
  StatusOr<std::vector<std::string>> shards = shard_paths(path);
  if (!shards.ok()) return shards.status();
  std::vector<uint64_t> sizes;
  uint64_t total_bytes = 0;
  for (const std::string& p : *shards) {
    std::error_code ec;
    sizes.push_back(fs::file_size(p, ec));
    if (ec) sizes.back() = 0;
    total_bytes += sizes.back();
  }
  DatasetRead read(options, total_bytes);
  std::unique_ptr<Dataset> d(new Dataset());
  for (size_t k = 0; k < shards->size(); ++k) {
    if (read.full()) {
      d->complete_ = false;  // shards left unread (perhaps empty ones: a head says it may be short)
      break;
    }
    const std::string& p = (*shards)[k];
    StatusOr<std::unique_ptr<RowFile>> f =
        is_parquet(p) ? open_parquet(p, read) : open_jsonl(p, read);
    if (!f.ok()) return f.status();
    if (!(*f)->complete()) d->complete_ = false;
    d->starts_.push_back(d->total_);
    d->total_ += (*f)->rows();
    d->files_.push_back(std::move(*f));
    read.end_file(sizes[k]);
  }
  return d;
}

std::pair<const RowFile*, uint64_t> Dataset::locate(uint64_t i) const {
  size_t f = size_t(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin()) - 1;
  // Skip empty files that share a start with the next.
  while (f + 1 < starts_.size() && starts_[f + 1] <= i) ++f;
  return {files_[f].get(), i - starts_[f]};
}

StatusOr<std::string> Dataset::row_text(uint64_t i) const {
  auto [file, local] = locate(i);
  return file->text(local);
}

StatusOr<json> Dataset::row(uint64_t i) const {
  StatusOr<std::string> text = row_text(i);
  if (!text.ok()) return text.status();
  return parse_row(text->data(), text->size(), where(i));
}

std::string Dataset::where(uint64_t i) const {
  auto [file, local] = locate(i);
  return file->where(local);
}

bool valid_utf8(const char* s, size_t n, size_t* bad_at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  size_t i = 0;
  auto fail = [&] {
    if (bad_at) *bad_at = i;
    return false;
  };
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || i + len > n) return fail();
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    if (p[i + 1] < lo || p[i + 1] > hi) return fail();
    for (size_t k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return fail();
    i += len;
  }
  return true;
}

const json* at_path(const json& row, const std::string& dotted) {
  if (!row.is_object()) return nullptr;
  if (auto it = row.find(dotted); it != row.end()) return &*it;
  const json* at = &row;
  size_t pos = 0;
  for (;;) {
    size_t dot = dotted.find('.', pos);
    std::string key = dotted.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
    if (dot == std::string::npos) return at;
    pos = dot + 1;
  }
}

}  // namespace tlt::dataset
