// io::atomic_write: the new file appears whole or not at all, and every failure is reported.
#include "runtime/io/atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;
using tlt::Status;
using tlt::StatusCode;
namespace io = tlt::io;

namespace {

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A fresh directory per test; the files beside the target tell whether a temporary was left.
class AtomicWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tlt-atomic-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int entries() const {
    int n = 0;
    for (auto it = fs::directory_iterator(dir_); it != fs::directory_iterator(); ++it) ++n;
    return n;
  }
  fs::path dir_;
};

TEST_F(AtomicWrite, WritesTheWholeContentAndReplacesTheOldFile) {
  std::string path = (dir_ / "f.bin").string();
  ASSERT_TRUE(io::atomic_write(path, std::string_view("old")).ok());
  std::string bytes(100000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 7);
  Status st = io::atomic_write(path, bytes, io::Sync::kNone);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(read(path), bytes);
  EXPECT_EQ(entries(), 1);  // no temporary left behind
}

TEST_F(AtomicWrite, TheCallbackMaySeekBack) {
  std::string path = (dir_ / "f.bin").string();
  Status st = io::atomic_write(path, [](std::ostream& out) {
    out << "xxxx-body";
    out.seekp(0);
    out << "head";
    return Status::Ok();
  });
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(read(path), "head-body");
}

TEST_F(AtomicWrite, AFailedRenameIsReportedAndLeavesNothingBehind) {
  // The target is a directory holding a file: rename(2) cannot replace it.
  fs::path target = dir_ / "ckpt";
  fs::create_directories(target);
  std::ofstream(target / "keep") << "data";
  Status st = io::atomic_write(target.string(), std::string_view("new"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find(target.string() + ": cannot rename"), std::string::npos)
      << st.to_string();
  EXPECT_EQ(read(target / "keep"), "data");
  EXPECT_EQ(entries(), 1);  // the temporary was removed
}

TEST_F(AtomicWrite, ACallbackErrorKeepsTheOldFile) {
  std::string path = (dir_ / "f.txt").string();
  ASSERT_TRUE(io::atomic_write(path, std::string_view("old")).ok());
  Status st = io::atomic_write(path, [](std::ostream& out) {
    out << "half of the new";
    return Status::Corruption("the writer refused");
  });
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_EQ(st.message(), "the writer refused");
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(entries(), 1);
}

TEST_F(AtomicWrite, AThrowingCallbackBecomesAnInternalErrorNamingThePath) {
  std::string path = (dir_ / "f.txt").string();
  ASSERT_TRUE(io::atomic_write(path, std::string_view("old")).ok());
  Status st = io::atomic_write(path, [](std::ostream& out) -> Status {
    out << "half";
    throw std::runtime_error("serialiser broke");
  });
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("serialiser broke"), std::string::npos) << st.to_string();
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(entries(), 1);
}

TEST_F(AtomicWrite, AMissingDirectoryNamesTheFix) {
  std::string path = (dir_ / "missing" / "f.txt").string();
  Status st = io::atomic_write(path, std::string_view("x"));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("check that the directory exists"), std::string::npos)
      << st.to_string();
}

}  // namespace
