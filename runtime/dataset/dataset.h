// A dataset of rows for spec.task.dataset: a JSONL or Parquet file, or a directory of such
// shards read in name order, each row a JSON object.
//
//   JSONL    one object per line. open() reads each file once, streaming, and keeps an index of
//            row byte offsets (16 bytes a row; rows are read again on demand with pread), so
//            memory is O(rows), not O(bytes). Blank lines are skipped (their numbers still count).
//            A line is at most kMaxLineBytes: a longer one is refused as soon as the limit is
//            passed, without being held whole. At most 2^32 - 1 rows and lines a file.
//   Parquet  read through the `parquet` crate's record API (runtime/dataset/src/lib.rs): each
//            row group is decoded once into one JSON object per row (nested groups become
//            objects, lists arrays), so one code path handles both formats. The rows' JSON
//            text is spooled to an unlinked temporary file (TMPDIR; about the rows' JSON size
//            on disk) and indexed (16 bytes a row): rows in any order cost a pread each. One
//            row group's JSON is held in memory while it is read.
//
// open() checks every row before it returns (nothing trains on a dataset with a bad row): a
// malformed JSON line, a line that is not UTF-8, a line over the limit, a row nested deeper than
// api::kMaxJsonDepth and a row that is not an object are InvalidArgument naming the file and its
// line number (Parquet: its row number).
// The visitor, when given, sees each row in order in the same pass and may refuse it; its error
// gets the row's place (where()) prefixed.
//
// A head: OpenOptions::max_rows reads (and checks) only the first rows, for checks that need not
// read a large dataset whole (`tlt validate`). Progress: OpenOptions::progress hears about a read
// that lasts, every progress_every_s seconds, from open()'s thread.
//
// Paths: a relative path is read from the working directory, which a missing path's error names.
// A .json file holding one JSON array or pretty-printed objects (the usual JSON dump, not JSON
// Lines) is refused at its first line with a hint to convert it (jq -c).
//
// Thread safety: after open(), row() may be called from several threads (rows are read with
// pread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::dataset {

inline constexpr uint64_t kMaxLineBytes = uint64_t(16) << 20;  // a JSONL line, newline excluded

// Sees row `index` (0-based over the whole dataset) as parsed. A non-OK status stops open().
using RowVisitor = std::function<Status(uint64_t index, const nlohmann::json& row)>;

// How far a read has come (OpenOptions::progress).
struct ReadProgress {
  std::string file;          // the shard being read
  uint64_t rows = 0;         // rows read so far, over the whole dataset
  uint64_t bytes = 0;        // bytes read so far (a Parquet shard's: estimated from its rows)
  uint64_t total_bytes = 0;  // the shards' sizes summed
};

struct OpenOptions {
  RowVisitor visit;       // sees each row as read (see the top)
  uint64_t max_rows = 0;  // > 0: read only the first max_rows rows (Dataset::complete())
  std::function<void(const ReadProgress&)> progress;  // called as the read goes on
  double progress_every_s = 5;  // the first call comes after this long, then one each interval
};

// "reading data/train.jsonl: 35% of 1.2 GB, 700000 rows": a progress line for a log.
std::string progress_line(const ReadProgress& p);

class RowFile;  // one file's rows (JSONL or Parquet), see dataset.cc

class Dataset {
 public:
  ~Dataset();
  // Opens `path` (a .jsonl/.json file, a .parquet file, or a directory of those, read in name
  // order; other files in a directory are ignored). NotFound when the path does not exist;
  // InvalidArgument for a file of another suffix, a directory without shards, a path or shard
  // that is not a regular file (a FIFO, socket or device, also through a symlink: refused
  // without ever blocking on it), or a bad row as above. An empty dataset is not an error here
  // (rows() == 0): the caller names its field.
  static StatusOr<std::unique_ptr<Dataset>> open(const std::string& path,
                                                 const RowVisitor& visit = nullptr);
  static StatusOr<std::unique_ptr<Dataset>> open(const std::string& path,
                                                 const OpenOptions& options);

  uint64_t rows() const { return total_; }
  // False when OpenOptions::max_rows stopped the read before the dataset's end (rows() then
  // counts the rows read).
  bool complete() const { return complete_; }
  // Row i (< rows()) parsed. Errors: the file changed or vanished since open() (InvalidArgument
  // or NotFound naming it).
  StatusOr<nlohmann::json> row(uint64_t i) const;
  // Row i's raw text (a JSONL line, or the JSON a Parquet row becomes): what a row's hash reads.
  StatusOr<std::string> row_text(uint64_t i) const;
  // Where row i lives: "data/train.jsonl:12" (line 12) or "data/train.parquet: row 12" (1-based).
  std::string where(uint64_t i) const;

 private:
  Dataset() = default;
  // The file holding row i and the row's index inside it.
  std::pair<const RowFile*, uint64_t> locate(uint64_t i) const;

  std::vector<std::unique_ptr<RowFile>> files_;
  std::vector<uint64_t> starts_;  // starts_[f]: the index of file f's first row
  uint64_t total_ = 0;
  bool complete_ = true;
};

// Whether `s` is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF); when
// not, *bad_at is the offset of the first bad byte.
bool valid_utf8(const char* s, size_t n, size_t* bad_at = nullptr);

// The value at a dotted path of objects ("reward_model.ground_truth") in `row`, or null when a
// step is missing or not an object. A key that itself contains the whole path wins.
const nlohmann::json* at_path(const nlohmann::json& row, const std::string& dotted);

}  // namespace tlt::dataset
