// The RL channel's file mirroring: what lets a cluster job's pods share no disk.
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

TEST(RlChannel, MirroredFilesTravelWithTheMessageAndPathsAreRewritten) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("tlt-mirror-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "a" / "buffer");
  fs::create_directories(root / "b");
  std::string a_dir = (root / "a").string(), b_dir = (root / "b").string();
  std::ofstream(root / "a" / "policy-1.ckpt") << std::string(200000, 'x');  // > a pipe's buffer
  std::ofstream(root / "a" / "buffer" / "step-1-w0.pt") << "hidden";
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  Channel sender(-1, p[1]), receiver(p[0], -1);
  sender.mirror_files(a_dir);
  receiver.mirror_files(b_dir);
  nlohmann::json m = {{"op", "generate"},
                      {"dir", a_dir},
                      {"policy", a_dir + "/policy-1.ckpt"},
                      {"buffers", {a_dir + "/buffer/step-1-w0.pt", "/elsewhere/x.pt"}}};
  std::thread t([&] {
    ASSERT_TRUE(sender.send(m).ok());
    ASSERT_TRUE(sender.send(m).ok());  // unchanged files are not sent again
  });
  std::vector<nlohmann::json> got;
  while (got.size() < 2) {
    auto r = receiver.receive(5000);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (r->has_value()) got.push_back(**r);
  }
  t.join();
  for (const nlohmann::json& g : got) {
    EXPECT_EQ(g["dir"], b_dir);
    EXPECT_EQ(g["policy"], b_dir + "/policy-1.ckpt");
    EXPECT_EQ(g["buffers"][0], b_dir + "/buffer/step-1-w0.pt");
    EXPECT_EQ(g["buffers"][1], "/elsewhere/x.pt") << "a path outside the directory is left alone";
  }
  EXPECT_EQ(fs::file_size(root / "b" / "policy-1.ckpt"), 200000u);
  std::ifstream h(root / "b" / "buffer" / "step-1-w0.pt");
  std::string hidden;
  h >> hidden;
  EXPECT_EQ(hidden, "hidden");
  // A frame naming a file outside the receiver's directory is refused.
  std::string evil =
      nlohmann::json{{"op", "file"}, {"rel", "../escape"}, {"size", 1}}.dump() + "\nx";
  ASSERT_EQ(::write(p[1], evil.data(), evil.size()), ssize_t(evil.size()));
  auto bad = receiver.receive(1000);
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(fs::exists(root / "escape"));
  ::close(p[0]);
  ::close(p[1]);
  fs::remove_all(root);
}

}  // namespace
}  // namespace tlt::rl
