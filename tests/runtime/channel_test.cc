// The RL channel's file mirroring: what lets a cluster job's pods share no disk, and the rules
// that keep a peer from writing anything the protocol does not send it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/rl/channel.h"

namespace tlt::rl {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh directory per test, removed at the end.
class ChannelDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("tlt-mirror-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "a" / "buffer");
    fs::create_directories(root_ / "b");
    ASSERT_EQ(::pipe(p_), 0);
  }
  void TearDown() override {
    ::close(p_[0]);
    ::close(p_[1]);
    fs::remove_all(root_);
  }
  std::string dir(const char* side) const { return (root_ / side).string(); }
  // Writes raw protocol bytes as a peer would (a frame, a message line).
  void put(const std::string& bytes) {
    ASSERT_EQ(::write(p_[1], bytes.data(), bytes.size()), ssize_t(bytes.size()));
  }
  static std::string frame(const std::string& rel, const std::string& bytes) {
    return json{{"op", "file"}, {"rel", rel}, {"size", bytes.size()}}.dump() + "\n" + bytes;
  }
  static std::string line(const json& m) { return m.dump() + "\n"; }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  fs::path root_;
  int p_[2] = {-1, -1};
};

TEST_F(ChannelDirs, MirroredFilesTravelWithTheMessageAndPathsAreRewritten) {
  std::ofstream(root_ / "a" / "policy-v1.ckpt") << std::string(200000, 'x');  // > a pipe buffer
  std::ofstream(root_ / "a" / "buffer" / "step-1-w0.pt") << "hidden";
  Channel driver(-1, p_[1]), worker(p_[0], -1);
  driver.mirror_files(dir("a"), driver_mirror_rules(0));
  worker.mirror_files(dir("b"), worker_mirror_rules());
  json gen = {{"op", "generate"}, {"dir", dir("a")}, {"policy", dir("a") + "/policy-v1.ckpt"}};
  json train = {{"op", "train"}, {"buffers", {dir("a") + "/buffer/step-1-w0.pt"}}};
  std::thread t([&] {
    ASSERT_TRUE(driver.send(gen).ok());
    ASSERT_TRUE(driver.send(train).ok());
    ASSERT_TRUE(driver.send(gen).ok());  // unchanged files are not sent again
  });
  std::vector<json> got;
  while (got.size() < 3) {
    auto r = worker.receive(5000);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (r->has_value()) got.push_back(**r);
  }
  t.join();
  for (size_t i : {0, 2}) {
    EXPECT_EQ(got[i]["dir"], dir("b"));
    EXPECT_EQ(got[i]["policy"], dir("b") + "/policy-v1.ckpt");
  }
  EXPECT_EQ(got[1]["buffers"][0], dir("b") + "/buffer/step-1-w0.pt");
  EXPECT_EQ(fs::file_size(root_ / "b" / "policy-v1.ckpt"), 200000u);
  EXPECT_EQ(read(root_ / "b" / "buffer" / "step-1-w0.pt"), "hidden");
}

// The findings of issue 51: a worker's op:file frames overwrote the trainer's policy-v0.ckpt and
// could name files outside the run directory.
TEST_F(ChannelDirs, Driver_RefusesFramesNamingFilesNoWorkerSends) {
  std::ofstream(root_ / "b" / "policy-v0.ckpt") << "the trainer's";
  for (std::string rel : {"policy-v0.ckpt", "../x", "/tmp/x", "buffer/step-1-w1.pt",
                          "drafter-v1.ckpt", "buffer/../policy-v0.ckpt", "drafter-w0.ckpt.tmp"}) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    Channel driver(p[0], -1);
    driver.mirror_files(dir("b"), driver_mirror_rules(0));  // from worker 0
    std::string bytes = frame(rel, "rogue") + line({{"op", "generated"}, {"buffer", "@/" + rel}});
    ASSERT_EQ(::write(p[1], bytes.data(), bytes.size()), ssize_t(bytes.size()));
    auto r = driver.receive(1000);
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << rel;
    ::close(p[0]);
    ::close(p[1]);
  }
  EXPECT_EQ(read(root_ / "b" / "policy-v0.ckpt"), "the trainer's");
  EXPECT_FALSE(fs::exists(root_ / "x"));
  EXPECT_FALSE(fs::exists(root_ / "b" / "buffer" / "step-1-w1.pt"));
  EXPECT_FALSE(fs::exists(root_ / "b" / "drafter-v1.ckpt"));
}

TEST_F(ChannelDirs, Driver_WritesAWorkersFileOnlyWithTheMessageThatNamesIt) {
  Channel driver(p_[0], -1);
  driver.mirror_files(dir("b"), driver_mirror_rules(0));
  // A buffer followed by a message of another op: refused, not written.
  put(frame("buffer/step-1-w0.pt", "hidden") + line({{"op", "trained"}, {"drafter", ""}}));
  EXPECT_EQ(driver.receive(1000).status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(fs::exists(root_ / "b" / "buffer" / "step-1-w0.pt"));

  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  Channel again(p[0], -1);
  again.mirror_files(dir("b"), driver_mirror_rules(0));
  std::string ok = frame("buffer/step-1-w0.pt", "hidden") +
                   line({{"op", "generated"}, {"buffer", "@/buffer/step-1-w0.pt"}});
  ASSERT_EQ(::write(p[1], ok.data(), ok.size()), ssize_t(ok.size()));
  auto r = again.receive(1000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((**r)["buffer"], dir("b") + "/buffer/step-1-w0.pt");
  EXPECT_EQ(read(root_ / "b" / "buffer" / "step-1-w0.pt"), "hidden");
  ::close(p[0]);
  ::close(p[1]);
}

TEST_F(ChannelDirs, Driver_RefusesMessagesPointingAtItsOwnFilesOrOutsideTheDirectory) {
  for (json m : {json{{"op", "generated"}, {"buffer", "@/policy-v0.ckpt"}},
                 json{{"op", "trained"}, {"drafter", "/etc/passwd"}},
                 json{{"op", "trained"}, {"drafter", "@/drafter-w1.ckpt"}},  // another worker's
                 json{{"op", "weights"}, {"policy", "@/policy-v0.ckpt"}},
                 json{{"op", "generated"}, {"buffers", "@/buffer/step-1-w0.pt"}}}) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    Channel driver(p[0], -1);
    driver.mirror_files(dir("b"), driver_mirror_rules(0));
    std::string bytes = line(m);
    ASSERT_EQ(::write(p[1], bytes.data(), bytes.size()), ssize_t(bytes.size()));
    EXPECT_EQ(driver.receive(1000).status().code(), StatusCode::kCorruption) << m.dump();
    ::close(p[0]);
    ::close(p[1]);
  }
}

TEST_F(ChannelDirs, Worker_TakesOnlyTheDriversCheckpointsAndBuffers) {
  Channel worker(p_[0], -1);
  worker.mirror_files(dir("b"), worker_mirror_rules());
  put(frame("drafter-w0.ckpt", "x") + line({{"op", "generate"}, {"drafter", "@/drafter-w0.ckpt"}}));
  EXPECT_EQ(worker.receive(1000).status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(fs::exists(root_ / "b" / "drafter-w0.ckpt"));
}

TEST_F(ChannelDirs, LinesNestedTooDeepAreCorruptionNotACrash) {
  Channel ch(p_[0], -1);
  std::thread t([&] { put(std::string(200000, '[') + std::string(200000, ']') + "\n"); });
  auto r = ch.receive(5000);
  while (r.ok() && !r->has_value()) r = ch.receive(5000);  // the line arrives in pieces
  t.join();
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace tlt::rl
