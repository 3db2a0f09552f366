// One file of a dataset (runtime/dataset/dataset.h): its rows' count and each row's text and
// place. Internal to runtime/dataset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "api/status.h"
#include "runtime/dataset/dataset.h"

namespace tlt::dataset {

class RowFile {
 public:
  virtual ~RowFile() = default;
  virtual uint64_t rows() const = 0;
  // Row i's JSON text (an object, checked by the open that made this file).
  virtual StatusOr<std::string> text(uint64_t i) const = 0;
  // "path:LINE" (JSONL) or "path: row N" (Parquet), 1-based.
  virtual std::string where(uint64_t i) const = 0;
  // False when the read stopped early (OpenOptions::max_rows) with rows left in the file.
  bool complete() const { return complete_; }

 protected:
  bool complete_ = true;
};

// One read of a dataset's shards: the options, the rows taken so far, and the progress clock.
class DatasetRead {
 public:
  DatasetRead(const OpenOptions& options, uint64_t total_bytes);
  const RowVisitor& visit() const { return options_.visit; }
  uint64_t rows() const { return rows_; }  // the dataset index of the next row
  // Counts one row taken, `file_bytes` into `file` (a shard of `file_size` bytes), and reports
  // progress when it is time.
  void took_row(const std::string& file, uint64_t file_bytes, uint64_t file_size);
  // True once max_rows rows were taken: a reader stops before its next row.
  bool full() const { return options_.max_rows > 0 && rows_ >= options_.max_rows; }
  void end_file(uint64_t file_size) { done_bytes_ += file_size; }

 private:
  const OpenOptions& options_;
  const uint64_t total_bytes_;
  uint64_t rows_ = 0, done_bytes_ = 0;  // done_bytes_: the shards read whole
  double start_s_ = 0, next_s_ = 0;
};

// The file's rows, checked, from row read.rows() of the dataset on; it stops early once the
// read is full().
StatusOr<std::unique_ptr<RowFile>> open_jsonl(const std::string& path, DatasetRead& read);
StatusOr<std::unique_ptr<RowFile>> open_parquet(const std::string& path, DatasetRead& read);

// Parses one row's text: InvalidArgument starting with `where` unless it is a JSON object nested
// at most api::kMaxJsonDepth levels (deeper rows are refused before they are parsed, since
// walking them recurses once per level).
StatusOr<nlohmann::json> parse_row(const char* s, size_t n, const std::string& where);

// Opens the file at `path` for reading, refusing anything but a regular file (through symlinks)
// without blocking on it: a FIFO, socket or device is InvalidArgument naming what it is and the
// fix, both when the path names one and when it is swapped for one after the check. Returns the
// blocking descriptor (the caller closes it); NotFound when the path does not exist.
StatusOr<int> open_regular(const std::string& path);

}  // namespace tlt::dataset
