// WorkerPool (runtime/rl/worker_pool.h): workers joining, leaving and restarting, with real
// processes and real loopback sockets; the "workers" are this test's side of the connection
// (remote) or a shell that echoes what it is sent (local). Peers that do not hold the job secret
// (issue 51) speak the rendezvous protocol by hand (raw sockets).
#include "runtime/rl/worker_pool.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "runtime/rl/channel.h"
#include "runtime/rl/rendezvous.h"
#include "tests/runtime/raw_peer.h"

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

constexpr const char* kSecret = "0123456789abcdef0123456789abcdef";

// Connects as remote worker `index` now: the socket, or -1.
int connect_now(int port, int index) {
  StatusOr<int> fd = connect_worker("127.0.0.1", port, index, kSecret, 10000);
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
  o.secret = kSecret;
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
  std::future<int> later = connect_later(port_, 1);  // welcomed once the pool serves its hello
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(pool_->present(1));  // not before the boundary
  ASSERT_TRUE(admit_until(*pool_, 1, true));
  int fd1 = later.get();
  ASSERT_GE(fd1, 0);
  Channel pod(fd1, fd1);
  EXPECT_EQ(next_message(pod), setup(1));
  ASSERT_TRUE(pool_->send(1, {{"op", "train"}}).ok());
  EXPECT_EQ(next_message(pod).value("op", ""), "train");
  ::close(fd1);
}

TEST_F(WorkerPoolRemote, Leave_DrafterPodThatHangsUpIsDroppedAndSendsToItAreOk) {
  std::future<int> pod = connect_later(port_, 1);
  ASSERT_TRUE(admit_until(*pool_, 1, true));
  int fd1 = pod.get();
  ASSERT_GE(fd1, 0);
  ::close(fd1);
  ASSERT_TRUE(admit_until(*pool_, 1, false));
  EXPECT_TRUE(pool_->send(1, {{"op", "train"}}).ok());  // an absent drafter slot: not an error
  // It may come back later, as a new pod.
  std::future<int> again = connect_later(port_, 1);
  EXPECT_TRUE(admit_until(*pool_, 1, true));
  int fd2 = again.get();
  ASSERT_GE(fd2, 0);
  ::close(fd2);
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

using testing::closed_within;
using testing::raw_connect;
using testing::read_json_line;
using testing::send_text;

// The pool at a step boundary, as often as a peer's test needs it to make progress.
auto boundaries(WorkerPool& pool) {
  return [&pool] { pool.admit_drafter_pods(2); };
}

// Issue 51: a peer without the job secret said {"op":"hello","index":0} and became worker 0.
TEST_F(WorkerPoolRemote, Handshake_HelloWithoutAValidProofIsRefusedAndNeverJoins) {
  auto pump = boundaries(*pool_);
  int got = 0;
  for (json hello : {json{{"op", "hello"}, {"index", 1}},
                     json{{"op", "hello"}, {"index", 1}, {"proof", std::string(64, '0')}},
                     json{{"op", "hello"}, {"index", 1}, {"proof", 7}}}) {
    int fd = raw_connect(port_);
    ASSERT_GE(fd, 0);
    json challenge = read_json_line(fd, 5000, pump);
    ASSERT_EQ(challenge.value("op", ""), "challenge") << challenge.dump();
    ASSERT_TRUE(send_text(fd, hello.dump() + "\n"));
    EXPECT_EQ(read_json_line(fd, 5000, pump).value("op", ""), "refused") << hello.dump();
    EXPECT_TRUE(closed_within(fd, 5000, pump));
    ::close(fd);
    ++got;
  }
  for (int i = 0; i < 10; ++i) pump();
  EXPECT_FALSE(pool_->present(1));
  EXPECT_EQ(pool_->take_unpaired(), got);
  EXPECT_EQ(pool_->take_unpaired(), 0) << "counted once";
}

TEST_F(WorkerPoolRemote, Handshake_HelloReplayedOnAnotherConnectionIsRefused) {
  auto pump = boundaries(*pool_);
  int a = raw_connect(port_), b = raw_connect(port_);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  std::string nonce_a = read_json_line(a, 5000, pump).value("nonce", "");
  std::string nonce_b = read_json_line(b, 5000, pump).value("nonce", "");
  ASSERT_EQ(nonce_a.size(), 32u);
  ASSERT_NE(nonce_a, nonce_b) << "a fresh nonce per connection";
  // What a real worker sent on connection a, captured and replayed on connection b.
  std::string hello =
      json{{"op", "hello"}, {"index", 1}, {"proof", hello_proof(kSecret, nonce_a, 1)}}.dump();
  ASSERT_TRUE(send_text(b, hello + "\n"));
  EXPECT_EQ(read_json_line(b, 5000, pump).value("op", ""), "refused");
  EXPECT_FALSE(pool_->present(1));
  ASSERT_TRUE(send_text(a, hello + "\n"));  // on its own connection it proves the secret
  EXPECT_EQ(read_json_line(a, 5000, pump).value("op", ""), "welcome");
  EXPECT_TRUE(admit_until(*pool_, 1, true));
  ::close(a);
  ::close(b);
}

TEST_F(WorkerPoolRemote, Handshake_WorkerWithAnotherSecretFailsNamingTheSecret) {
  std::atomic<bool> done{false};
  std::thread boundary([&] {
    while (!done) {
      pool_->admit_drafter_pods(2);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  StatusOr<int> fd = connect_worker("127.0.0.1", port_, 1, "another-secret-of-16+bytes", 5000);
  done = true;
  boundary.join();
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fd.status().message().find("TLT_JOB_SECRET"), std::string::npos)
      << fd.status().message();
  EXPECT_FALSE(pool_->present(1));
}

// Issue 51: one silent connection a second stopped the job (10 s per connection, inside the
// step loop).
TEST_F(WorkerPoolRemote, Stall_SilentPeersNeitherDelayAStepBoundaryNorAWorker) {
  std::vector<int> silent;
  for (int i = 0; i < 5; ++i) silent.push_back(raw_connect(port_));
  std::future<int> pod = connect_later(port_, 1);
  double slowest = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (!pool_->present(1) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    auto t = std::chrono::steady_clock::now();
    pool_->admit_drafter_pods(2);
    slowest = std::max(slowest,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(pool_->present(1));
  EXPECT_LT(slowest, 0.2) << "a step boundary waited on a peer";
  int fd = pod.get();
  EXPECT_GE(fd, 0);
  for (int s : silent) ::close(s);
  ::close(fd);
}

TEST(WorkerPoolRemoteHandshake, Deadline_SilentConnectionIsClosedAndCounted) {
  WorkerPoolOptions o = remote_options(free_port(), "/tmp");
  o.hello_timeout_ms = 300;
  WorkerPool pool(o, setup, nullptr);
  std::future<int> w0 = connect_later(o.listen_port, 0);
  ASSERT_TRUE(pool.start(1).ok());
  int silent = raw_connect(o.listen_port);
  ASSERT_GE(silent, 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(closed_within(silent, 3000, boundaries(pool)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  EXPECT_EQ(pool.connection_counters().timed_out, 1);
  EXPECT_EQ(pool.take_unpaired(), 1);
  ::close(silent);
  ::close(w0.get());
}

// Issue 51: 300 hellos with unknown indexes stayed open until accept() failed with EMFILE.
TEST(WorkerPoolRemoteHandshake, Cap_UnprovenConnectionsAreClosedAndHandshakesCapped) {
  WorkerPoolOptions o = remote_options(free_port(), "/tmp");
  o.max_handshakes = 8;
  WorkerPool pool(o, setup, nullptr);
  std::future<int> w0 = connect_later(o.listen_port, 0);
  ASSERT_TRUE(pool.start(1).ok());
  auto pump = boundaries(pool);
  std::vector<int> peers;
  for (int i = 0; i < 300; ++i) {  // hellos for unknown indexes, without a proof
    int fd = raw_connect(o.listen_port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_text(fd, json{{"op", "hello"}, {"index", 1000 + i}}.dump() + "\n"));
    peers.push_back(fd);
    pump();  // keeps the listen backlog short: connect() blocks on a full one
  }
  for (int fd : peers) EXPECT_TRUE(closed_within(fd, 5000, pump));
  RendezvousCounters c = pool.connection_counters();
  EXPECT_EQ(c.refused + c.dropped, 300);
  EXPECT_EQ(c.joined, 1);  // worker 0
  // Silent ones beyond the cap: the oldest go first, the newest wait for their hello.
  std::vector<int> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(raw_connect(o.listen_port));
  for (int i = 0; i < 20; ++i) pump(), std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pool.connection_counters().dropped - c.dropped, 12);
  EXPECT_TRUE(closed_within(silent.front(), 1000, pump));
  EXPECT_FALSE(closed_within(silent.back(), 200, pump));
  for (int fd : peers) ::close(fd);
  for (int fd : silent) ::close(fd);
  ::close(w0.get());
}

// Issue 51: the trainer out of descriptors ignored SIGTERM.
TEST(WorkerPoolRemoteStart, Stop_ASignalEndsTheWaitForARolloutWorker) {
  WorkerPoolOptions o = remote_options(free_port(), "/tmp");
  o.connect_timeout_s = 60;
  std::atomic<bool> stop{false};
  o.stop = &stop;
  WorkerPool pool(o, setup, nullptr);
  std::thread signal([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  auto t0 = std::chrono::steady_clock::now();
  Status st = pool.start(1);
  signal.join();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

TEST(WorkerPoolRemoteStart, TrainerWithoutASecretFailsNamingWhatToSet) {
  WorkerPoolOptions o = remote_options(free_port(), "/tmp");
  o.secret = "";
  ::unsetenv("TLT_JOB_SECRET");
  ::setenv("TLT_JOB_SECRET_FILE", "/nonexistent/tlt-secret", 1);
  WorkerPool pool(o, setup, nullptr);
  Status st = pool.start(1);
  ::unsetenv("TLT_JOB_SECRET_FILE");
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.message();
  EXPECT_NE(st.message().find("TLT_JOB_SECRET"), std::string::npos) << st.message();
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
