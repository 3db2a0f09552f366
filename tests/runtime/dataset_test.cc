// runtime/dataset: JSONL and Parquet rows, shards, and every hostile input the reader refuses.
#include "runtime/dataset/dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
  EXPECT_NE(e.find(p + ":3: malformed JSON"), std::string::npos) << e;
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
