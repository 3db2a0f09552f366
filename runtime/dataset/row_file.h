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
};

// The file's rows, checked; `first` is the dataset index of its first row (for the visitor).
StatusOr<std::unique_ptr<RowFile>> open_jsonl(const std::string& path, uint64_t first,
                                              const RowVisitor& visit);
StatusOr<std::unique_ptr<RowFile>> open_parquet(const std::string& path, uint64_t first,
                                                const RowVisitor& visit);

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
