// runtime/dataset: JSONL and Parquet rows, shards, and every hostile input the reader refuses.
#include "runtime/dataset/dataset.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

namespace tlt::dataset {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kDir = std::string(TLT_SOURCE_DIR) + "/tests/dataset/";

// A scratch directory removed with the test.
class Scratch {
 public:
  Scratch() {
    dir_ = fs::temp_directory_path() /
           ("tlt-dataset-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  ~Scratch() { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

std::string open_error(const std::string& path, const RowVisitor& visit = nullptr) {
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(path, visit);
  return d.ok() ? std::string("(opened)") : d.status().message();
}

TEST(Dataset, JsonlRowsAndPlaces) {
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(kDir + "arith.jsonl");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ((*d)->rows(), 12u);
  StatusOr<json> row = (*d)->row(3);
  ASSERT_TRUE(row.ok());
  EXPECT_EQ((*row)["prompt"], "What is 6 + 13?");
  EXPECT_EQ((*row)["extra"]["id"], 3);
  EXPECT_EQ((*d)->where(3), kDir + "arith.jsonl:4");
}

TEST(Dataset, BlankLinesSkippedTheirNumbersCounted) {
  Scratch s;
  std::string p = s.write("a.jsonl", "\n{\"x\": 1}\r\n  \n{\"x\": 2}");  // CRLF, no final newline
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(p);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ((*d)->rows(), 2u);
  EXPECT_EQ((*d)->where(0), p + ":2");
  EXPECT_EQ((*d)->where(1), p + ":4");
  EXPECT_EQ((*(*d)->row(1))["x"], 2);
  EXPECT_EQ(*(*d)->row_text(0), "{\"x\": 1}");
}

TEST(Dataset, MalformedJsonNamesTheLine) {
  Scratch s;
  std::string p = s.write("bad.jsonl", "{\"x\": 1}\n{\"x\": 2}\n{\"x\": \n{\"x\": 4}\n");
  std::string e = open_error(p);
  EXPECT_NE(e.find(p + ":3: not valid JSON"), std::string::npos) << e;
}

TEST(Dataset, NonUtf8LineNamesTheLine) {
  Scratch s;
  std::string p = s.write("latin1.jsonl", "{\"x\": \"ok\"}\n{\"x\": \"caf\xE9\"}\n");
  std::string e = open_error(p);
  EXPECT_NE(e.find(p + ":2: the line is not UTF-8 (byte 11)"), std::string::npos) << e;
}

TEST(Dataset, RowThatIsNotAnObject) {
  Scratch s;
  std::string p = s.write("list.jsonl", "{\"x\": 1}\n[1, 2]\n");
  std::string e = open_error(p);
  EXPECT_NE(e.find(p + ":2: the row is a JSON array, not an object"), std::string::npos) << e;
  p = s.write("scalar.jsonl", "\"text\"\n");
  e = open_error(p);
  EXPECT_NE(e.find(p + ":1: the row is a JSON string"), std::string::npos) << e;
}

// `depth` arrays nested in a row object: the row nests depth + 1 levels.
std::string nested_row(size_t depth) {
  return "{\"x\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
}

// A row a million levels deep (2 MB, under the line limit) is refused before it is parsed: dumping
// or walking it recursively would overflow the stack.
TEST(Dataset, DeeplyNestedRowNamesTheLine) {
  Scratch s;
  std::string p = s.write("deep.jsonl", "{\"x\": 1}\n" + nested_row(1000000) + "\n");
  std::string e = open_error(p, [](uint64_t, const json& row) {
    row.dump();  // what DatasetTask's visitor does with each row
    return Status::Ok();
  });
  EXPECT_NE(e.find(p + ":2: JSON nested deeper than 128 levels"), std::string::npos) << e;
  // The limit itself is allowed.
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(s.write("at.jsonl", nested_row(127)));
  ASSERT_TRUE(d.ok()) << d.status().message();
  e = open_error(s.write("over.jsonl", nested_row(128)));
  EXPECT_NE(e.find(s.path("over.jsonl") + ":1: JSON nested deeper than 128 levels"),
            std::string::npos)
      << e;
}

// Dataset::open(path) within 10 s; a FIFO that blocked it is opened for writing (and closed) to
// let it go, and the test fails.
std::string open_error_bounded(const std::string& path, const std::string& fifo) {
  auto result = std::async(std::launch::async, [path] { return open_error(path); });
  if (result.wait_for(std::chrono::seconds(10)) == std::future_status::ready) return result.get();
  int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (w >= 0) ::close(w);
  ADD_FAILURE() << path << ": Dataset::open blocked";
  return result.get();
}

// A FIFO, socket or device named like a shard is refused at once, by what it is, also behind a
// symlink and inside a shard directory: nothing waits for a writer.
TEST(Dataset, NonRegularPathsRefusedWithoutBlocking) {
  Scratch s;
  std::string fifo = s.path("pipe.jsonl");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string e = open_error_bounded(fifo, fifo);
  EXPECT_NE(e.find(fifo + ": is a FIFO (named pipe), not a regular file"), std::string::npos) << e;
  EXPECT_NE(e.find("copy the rows into a regular file"), std::string::npos) << e;

  std::string bare = s.path("pipe");
  ASSERT_EQ(::mkfifo(bare.c_str(), 0600), 0);
  fs::create_symlink(bare, s.path("link.parquet"));
  e = open_error_bounded(s.path("link.parquet"), bare);
  EXPECT_NE(e.find(s.path("link.parquet") + ": is a FIFO"), std::string::npos) << e;

  fs::create_directories(s.path("shards"));
  s.write("shards/a.jsonl", "{\"x\": 1}\n");
  std::string inner = s.path("shards/b.jsonl");
  ASSERT_EQ(::mkfifo(inner.c_str(), 0600), 0);
  e = open_error_bounded(s.path("shards"), inner);
  EXPECT_NE(e.find(inner + ": is a FIFO"), std::string::npos) << e;

  fs::create_symlink("/dev/null", s.path("null.jsonl"));
  e = open_error(s.path("null.jsonl"));
  EXPECT_NE(e.find(s.path("null.jsonl") + ": is a character device"), std::string::npos) << e;
}

// A 100 MB line is refused at the limit: the reader never holds more than the limit and a read
// buffer of it.
TEST(Dataset, HundredMegabyteLineRefused) {
  Scratch s;
  std::string p = s.path("huge.jsonl");
  {
    std::ofstream f(p, std::ios::binary);
    f << "{\"x\": 1}\n{\"x\": \"";
    std::string chunk(1 << 20, 'a');
    for (int i = 0; i < 100; ++i) f << chunk;
    f << "\"}\n";
  }
  std::string e = open_error(p);
  EXPECT_NE(e.find(p + ":2: the line is longer than 16 MiB"), std::string::npos) << e;
}

TEST(Dataset, ParquetRowsAsJsonObjects) {
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(kDir + "verl.parquet");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ((*d)->rows(), 8u);
  StatusOr<json> row = (*d)->row(5);  // the second row group
  ASSERT_TRUE(row.ok()) << row.status().message();
  EXPECT_EQ((*row)["data_source"], "tlt/arith");
  ASSERT_TRUE((*row)["prompt"].is_array()) << row->dump();
  ASSERT_EQ((*row)["prompt"].size(), 2u);
  EXPECT_EQ((*row)["prompt"][1]["role"], "user");
  EXPECT_EQ((*row)["prompt"][1]["content"], "Compute 7 * 10.");
  EXPECT_EQ((*row)["reward_model"]["ground_truth"], "70");
  EXPECT_EQ((*d)->where(5), kDir + "verl.parquet: row 6");
  EXPECT_EQ((*(*d)->row(0))["reward_model"]["ground_truth"], "10");  // back to group 0
}

TEST(Dataset, ShardsInNameOrderAcrossFormats) {
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(kDir + "shards");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ((*d)->rows(), 9u);
  for (uint64_t i = 0; i < 9; ++i) EXPECT_EQ((*(*d)->row(i))["extra"]["id"], 100 + int(i));
  EXPECT_EQ((*d)->where(4), kDir + "shards/part-001.jsonl:2");
  EXPECT_EQ((*d)->where(8), kDir + "shards/part-002.parquet: row 3");
}

TEST(Dataset, AnEmptyShardAmongOthers) {
  Scratch s;
  s.write("a.jsonl", "{\"x\": 0}\n{\"x\": 1}\n");
  s.write("b.jsonl", "");
  s.write("c.jsonl", "{\"x\": 2}\n");
  s.write("notes.txt", "not a shard");
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(s.path(""));
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ((*d)->rows(), 3u);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ((*(*d)->row(i))["x"], int(i));
  EXPECT_EQ((*d)->where(2), s.path("c.jsonl") + ":1");
}

TEST(Dataset, VisitorSeesEveryRowAndItsErrorsArePlaced) {
  std::vector<uint64_t> seen;
  auto visit = [&](uint64_t i, const json&) {
    seen.push_back(i);
    return Status::Ok();
  };
  ASSERT_TRUE(Dataset::open(kDir + "shards", visit).ok());
  EXPECT_EQ(seen, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  auto refuse = [](uint64_t i, const json&) {
    return i == 7 ? Status::InvalidArgument("no") : Status::Ok();
  };
  EXPECT_EQ(open_error(kDir + "shards", refuse), kDir + "shards/part-002.parquet: row 2: no");
}

TEST(Dataset, PathsRefused) {
  Scratch s;
  EXPECT_NE(open_error(s.path("missing.jsonl")).find("no such file"), std::string::npos);
  std::string csv = s.write("data.csv", "a,b\n");
  EXPECT_NE(open_error(csv).find("ends in .jsonl, .json or .parquet"), std::string::npos);
  fs::create_directories(s.path("empty"));
  EXPECT_NE(open_error(s.path("empty")).find("holds no .jsonl"), std::string::npos);
  std::string fake = s.write("fake.parquet", "this is not parquet at all");
  EXPECT_NE(open_error(fake).find(fake + ": not a Parquet file"), std::string::npos)
      << open_error(fake);
  StatusOr<std::unique_ptr<Dataset>> empty = Dataset::open(s.write("none.jsonl", "\n\n"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->rows(), 0u);
}

// A JSON dump instead of JSON Lines (one array, or pretty-printed objects) is refused at its
// first line with the jq command that converts it.
TEST(Dataset, JsonArrayAndPrettyPrintedJsonGetAHint) {
  Scratch s;
  std::string arr = s.write("rows.json", "[\n  {\"prompt\": \"1 + 1?\", \"answer\": \"2\"}\n]\n");
  std::string e = open_error(arr);
  EXPECT_NE(e.find(arr +
                   ":1: not valid JSON; this looks like a JSON array: tlt reads JSON Lines, "
                   "one object per line; convert it with `jq -c '.[]' " +
                   arr + " > " + s.path("rows.jsonl") + "`"),
            std::string::npos)
      << e;
  std::string one_line = s.write("one.json", "[{\"x\": 1}, {\"x\": 2}]\n");
  e = open_error(one_line);
  EXPECT_NE(e.find(":1: the row is a JSON array, not an object; this looks like a JSON array"),
            std::string::npos)
      << e;
  std::string pretty = s.write("pretty.jsonl", "{\n  \"x\": 1\n}\n");
  e = open_error(pretty);
  EXPECT_NE(e.find(pretty +
                   ":1: not valid JSON; this looks like pretty-printed JSON: tlt reads "
                   "JSON Lines, one object per line; convert it with `jq -c . " +
                   pretty + " > " + pretty + ".jsonl`"),
            std::string::npos)
      << e;
  // A bad line after good ones is a bad line, not a format.
  std::string later = s.write("later.jsonl", "{\"x\": 1}\n[1]\n");
  EXPECT_EQ(open_error(later).find("looks like"), std::string::npos) << open_error(later);
}

// A relative path that is missing names the working directory it was read from.
TEST(Dataset, MissingRelativePathNamesTheWorkingDirectory) {
  std::string e = open_error("no-such-dir/train.jsonl");
  EXPECT_NE(e.find("no-such-dir/train.jsonl: no such file or directory (a relative path is read "
                   "from the working directory, " +
                   fs::current_path().string() + ")"),
            std::string::npos)
      << e;
  EXPECT_EQ(open_error("/no-such-dir/train.jsonl"),
            "/no-such-dir/train.jsonl: no such file or directory");
}

// max_rows reads a head: the first rows, checked as usual, over shards; complete() says whether
// the dataset ended there.
TEST(Dataset, HeadReadsTheFirstRows) {
  OpenOptions o;
  o.max_rows = 5;
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(kDir + "shards", o);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ((*d)->rows(), 5u);
  EXPECT_FALSE((*d)->complete());
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ((*(*d)->row(i))["extra"]["id"], 100 + int(i));
  o.max_rows = 3;  // inside the Parquet file's row groups
  d = Dataset::open(kDir + "verl.parquet", o);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ((*d)->rows(), 3u);
  EXPECT_FALSE((*d)->complete());
  o.max_rows = 12;  // exactly the file's rows
  d = Dataset::open(kDir + "arith.jsonl", o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->rows(), 12u);
  EXPECT_TRUE((*d)->complete());
  o.max_rows = 100;
  d = Dataset::open(kDir + "shards", o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->rows(), 9u);
  EXPECT_TRUE((*d)->complete());
  // A bad row past the head is not read.
  Scratch s;
  o.max_rows = 1;
  EXPECT_TRUE(Dataset::open(s.write("bad.jsonl", "{\"x\": 1}\n{\"x\": \n"), o).ok());
}

// Progress comes while a read lasts: rows and bytes grow, and the last report is within the data.
TEST(Dataset, ProgressWhileReading) {
  Scratch s;
  std::string p = s.path("big.jsonl");
  {
    std::ofstream f(p);
    for (int i = 0; i < 200000; ++i) f << "{\"prompt\": \"What is " << i << " + 1?\"}\n";
  }
  std::vector<ReadProgress> seen;
  OpenOptions o;
  o.progress_every_s = 0;  // every 1024 rows
  o.progress = [&](const ReadProgress& r) { seen.push_back(r); };
  StatusOr<std::unique_ptr<Dataset>> d = Dataset::open(p, o);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_GE(seen.size(), 100u);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GT(seen[i].rows, seen[i - 1].rows);
    EXPECT_GT(seen[i].bytes, seen[i - 1].bytes);
  }
  EXPECT_EQ(seen.back().file, p);
  EXPECT_EQ(seen.back().total_bytes, fs::file_size(p));
  EXPECT_LE(seen.back().bytes, seen.back().total_bytes);
  EXPECT_LE(seen.back().rows, 200000u);
}

TEST(Dataset, DottedPaths) {
  json row = {{"a", {{"b", {{"c", 3}}}}}, {"x.y", 1}, {"s", "t"}};
  ASSERT_NE(at_path(row, "a.b.c"), nullptr);
  EXPECT_EQ(*at_path(row, "a.b.c"), 3);
  EXPECT_EQ(*at_path(row, "x.y"), 1);  // a key holding the whole path wins
  EXPECT_EQ(at_path(row, "a.b.d"), nullptr);
  EXPECT_EQ(at_path(row, "s.t"), nullptr);  // through a non-object
  EXPECT_EQ(at_path(row, "missing"), nullptr);
}

TEST(Dataset, Utf8Validation) {
  size_t at = 0;
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9 \xF0\x9F\x98\x80", 10));
  EXPECT_FALSE(valid_utf8("a\xC0\xAF", 3, &at));  // overlong '/'
  EXPECT_EQ(at, 1u);
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80", 3));      // a surrogate
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80", 4));  // above U+10FFFF
  EXPECT_FALSE(valid_utf8("ab\xE2\x82", 4, &at));   // cut short
  EXPECT_EQ(at, 2u);
}

}  // namespace
}  // namespace tlt::dataset
