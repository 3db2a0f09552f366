// WorkerPool (runtime/rl/worker_pool.h): workers joining, leaving and restarting, with real
// processes and real loopback sockets; the "workers" are this test's side of the connection
// (remote) or a shell that echoes what it is sent (local).
#include "runtime/rl/worker_pool.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "runtime/rl/channel.h"
#include "runtime/rl/rendezvous.h"

namespace tlt::rl {
namespace {

using nlohmann::json;

// A port nothing listens on now (the kernel's pick for an ephemeral bind).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

json setup(int w) {
  return {{"op", "setup"}, {"index", w}};
}

// The next message on `ch`, or null after 10 s.
json next_message(Channel& ch) {
  StatusOr<std::optional<json>> m = ch.receive(10000);
  if (!m.ok() || !m->has_value()) return json();
  return **m;
}

// Connects as remote worker `index` now: the socket, or -1.
int connect_now(int port, int index) {
  StatusOr<int> fd = connect_worker("127.0.0.1", port, index, 10000);
  return fd.ok() ? *fd : -1;
}

// Connects as remote worker `index` in the background (the pool may not listen yet).
std::future<int> connect_later(int port, int index) {
  return std::async(std::launch::async, [=] { return connect_now(port, index); });
}

WorkerPoolOptions remote_options(int port, const std::string& dir) {
  WorkerPoolOptions o;
  o.workers = 2, o.rollout_workers = 1;  // slot 1: a drafter pod
  o.run_dir = dir;
  o.listen_port = port, o.listen_loopback = true;
  o.connect_timeout_s = 10;
  o.drafter_pods_at_start = 0, o.drafter_start_grace_s = 0;
  return o;
}

// Admits drafter pods at step boundaries until slot w's presence is `want` (at most 5 s).
bool admit_until(WorkerPool& pool, int w, bool want) {
  for (int i = 0; i < 100 && pool.present(w) != want; ++i) {
    pool.admit_drafter_pods(2);
    if (pool.present(w) != want) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pool.present(w) == want;
}

class WorkerPoolRemote : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("tlt-worker-pool-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    port_ = free_port();
    pool_ = std::make_unique<WorkerPool>(remote_options(port_, dir_.string()), setup, nullptr);
    std::future<int> worker0 = connect_later(port_, 0);
    ASSERT_TRUE(pool_->start(1).ok());
    fd0_ = worker0.get();
    ASSERT_GE(fd0_, 0);
  }
  void TearDown() override {
    pool_.reset();
    if (fd0_ >= 0) ::close(fd0_);
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  int port_ = 0, fd0_ = -1;
  std::unique_ptr<WorkerPool> pool_;
};

TEST_F(WorkerPoolRemote, StartWaitsForTheRolloutWorkerAndSendsItsSetup) {
  EXPECT_TRUE(pool_->present(0));
  EXPECT_FALSE(pool_->present(1));  // no drafter pod awaited at the start
  Channel ch(fd0_, fd0_);
  EXPECT_EQ(next_message(ch), setup(0));
}

TEST_F(WorkerPoolRemote, Join_DrafterPodIsAdmittedAtAStepBoundaryWithItsSetup) {
  int fd1 = connect_now(port_, 1);
  ASSERT_GE(fd1, 0);
  EXPECT_FALSE(pool_->present(1));  // not before the boundary
  ASSERT_TRUE(admit_until(*pool_, 1, true));
  Channel pod(fd1, fd1);
  EXPECT_EQ(next_message(pod), setup(1));
  ASSERT_TRUE(pool_->send(1, {{"op", "train"}}).ok());
  EXPECT_EQ(next_message(pod).value("op", ""), "train");
  ::close(fd1);
}

TEST_F(WorkerPoolRemote, Leave_DrafterPodThatHangsUpIsDroppedAndSendsToItAreOk) {
  int fd1 = connect_now(port_, 1);
  ASSERT_GE(fd1, 0);
  ASSERT_TRUE(admit_until(*pool_, 1, true));
  ::close(fd1);
  ASSERT_TRUE(admit_until(*pool_, 1, false));
  EXPECT_TRUE(pool_->send(1, {{"op", "train"}}).ok());  // an absent drafter slot: not an error
  // It may come back later, as a new pod.
  int again = connect_now(port_, 1);
  ASSERT_GE(again, 0);
  EXPECT_TRUE(admit_until(*pool_, 1, true));
  ::close(again);
}

TEST_F(WorkerPoolRemote, Restart_RolloutWorkerThatDiesIsWaitedForUntilItConnectsAgain) {
  ::close(fd0_);
  fd0_ = -1;
  StatusOr<std::vector<int>> ready = pool_->wait_readable(5000);
  ASSERT_TRUE(ready.ok());
  ASSERT_EQ(*ready, std::vector<int>{0});
  EXPECT_FALSE(pool_->channel(0).pump().ok());  // its end
  std::future<int> back = connect_later(port_, 0);
  ASSERT_TRUE(pool_->restart(0).ok());
  fd0_ = back.get();
  ASSERT_GE(fd0_, 0);
  Channel ch(fd0_, fd0_);
  EXPECT_EQ(next_message(ch), setup(0));
  ASSERT_TRUE(pool_->send(0, {{"op", "generate"}}).ok());
  EXPECT_EQ(next_message(ch).value("op", ""), "generate");
}

TEST(WorkerPoolRemoteStart, RolloutWorkerThatNeverConnectsIsDeadlineExceededNamingIt) {
  WorkerPoolOptions o = remote_options(free_port(), "/tmp");
  o.connect_timeout_s = 1;
  WorkerPool pool(o, setup, nullptr);
  Status st = pool.start(1);
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("rollout worker 0"), std::string::npos) << st.message();
}

// Local workers: a shell that echoes every message back stands in for `tlt rl-worker`.
TEST(WorkerPoolLocal, Restart_KilledProcessIsReapedAndRespawnedWithItsSetup) {
  std::filesystem::path exe = std::filesystem::temp_directory_path() /
                              ("tlt-echo-worker-" + std::to_string(::getpid()) + ".sh");
  {
    std::ofstream f(exe);
    f << "#!/bin/sh\nexec cat\n";
  }
  std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
  WorkerPoolOptions o;
  o.workers = 1, o.rollout_workers = 1, o.worker_exe = exe.string();
  ::signal(SIGPIPE, SIG_IGN);
  WorkerPool pool(o, setup, nullptr);
  ASSERT_TRUE(pool.start(1).ok());
  pid_t first = pool.pid(0);
  ASSERT_GT(first, 0);
  EXPECT_EQ(next_message(pool.channel(0)), setup(0));  // echoed
  ::kill(first, SIGKILL);
  StatusOr<std::vector<int>> ready = pool.wait_readable(5000);
  ASSERT_TRUE(ready.ok());
  ASSERT_EQ(*ready, std::vector<int>{0});
  EXPECT_FALSE(pool.channel(0).pump().ok());
  ASSERT_TRUE(pool.restart(0).ok());
  EXPECT_NE(pool.pid(0), first);
  EXPECT_EQ(next_message(pool.channel(0)), setup(0));
  pool.shutdown();
  pool.shutdown();  // a second one is harmless
  EXPECT_EQ(pool.pid(0), -1);
  std::filesystem::remove(exe);
}

}  // namespace
}  // namespace tlt::rl
