// The trainer's rendezvous (runtime/rl/rendezvous.h) on its own: the proof, what a hello leaves
// on the socket, and accept() out of descriptors.
#include "runtime/rl/rendezvous.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/runtime/raw_peer.h"

namespace tlt::rl {
namespace {

using nlohmann::json;
using testing::raw_connect;
using testing::read_json_line;
using testing::send_text;

constexpr const char* kSecret = "fedcba9876543210fedcba9876543210";

StatusOr<std::unique_ptr<Rendezvous>> listen_here(int max_handshakes = 64) {
  RendezvousOptions o;
  o.port = 0, o.loopback = true, o.secret = kSecret, o.max_handshakes = max_handshakes;
  return Rendezvous::listen(o);
}

TEST(Rendezvous, ProofBindsTheSecretTheNonceAndTheIndex) {
  std::string p = hello_proof(kSecret, "00112233445566778899aabbccddeeff", 0);
  EXPECT_EQ(p.size(), 64u);
  EXPECT_NE(p, hello_proof("another secret, 16+ bytes", "00112233445566778899aabbccddeeff", 0));
  EXPECT_NE(p, hello_proof(kSecret, "00112233445566778899aabbccddeef0", 0));
  EXPECT_NE(p, hello_proof(kSecret, "00112233445566778899aabbccddeeff", 1));
  EXPECT_EQ(p, hello_proof(kSecret, "00112233445566778899aabbccddeeff", 0));
}

TEST(Rendezvous, ListeningWithoutASecretIsRefused) {
  RendezvousOptions o;
  o.port = 0, o.loopback = true, o.secret = "short";
  StatusOr<std::unique_ptr<Rendezvous>> r = Rendezvous::listen(o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("TLT_JOB_SECRET"), std::string::npos);
}

// The Channel takes over the socket after the hello: what the worker sent after it stays there.
TEST(Rendezvous, AJoinedWorkersBytesAfterItsHelloAreLeftForTheChannel) {
  StatusOr<std::unique_ptr<Rendezvous>> r = listen_here();
  ASSERT_TRUE(r.ok()) << r.status().message();
  Rendezvous& rv = **r;
  int fd = raw_connect(rv.port());
  ASSERT_GE(fd, 0);
  std::vector<JoinedWorker> joined;
  auto pump = [&] {
    for (const JoinedWorker& j : rv.service(0)) joined.push_back(j);
  };
  std::string nonce = read_json_line(fd, 5000, pump).value("nonce", "");
  ASSERT_FALSE(nonce.empty());
  std::string hello =
      json{{"op", "hello"}, {"index", 3}, {"proof", hello_proof(kSecret, nonce, 3)}}.dump();
  ASSERT_TRUE(send_text(fd, hello + "\n{\"op\":\"generated\"}\n"));
  EXPECT_EQ(read_json_line(fd, 5000, pump).value("op", ""), "welcome");
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].index, 3);
  char buf[64] = {};
  ssize_t n = ::recv(joined[0].fd, buf, sizeof buf, 0);
  EXPECT_EQ(std::string(buf, size_t(std::max<ssize_t>(0, n))), "{\"op\":\"generated\"}\n");
  EXPECT_EQ(rv.counters().joined, 1);
  EXPECT_EQ(rv.counters().unpaired(), 0);
  ::close(joined[0].fd);
  ::close(fd);
}

// Issue 51: at the descriptor limit accept() failed with EMFILE and the trainer spun at 80% CPU.
// In a child process (its descriptor limit lowered and used up) the rendezvous is serviced for
// 1.5 s with connections waiting: it must count the failures and sleep, not spin.
TEST(Rendezvous, AcceptOutOfDescriptorsBacksOffInsteadOfSpinning) {
  int port_pipe[2];
  ASSERT_EQ(::pipe(port_pipe), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StatusOr<std::unique_ptr<Rendezvous>> r = listen_here();
    if (!r.ok()) _exit(10);
    int port = (*r)->port();
    if (::write(port_pipe[1], &port, sizeof port) != sizeof port) _exit(11);
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = 64;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(12);
    while (::dup(0) >= 0) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the parent connects
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < end) (*r)->service(50);
    ::getrusage(RUSAGE_SELF, &after);
    double cpu = double(after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
                 double(after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
                 1e-6 * double(after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
                 1e-6 * double(after.ru_stime.tv_usec - before.ru_stime.tv_usec);
    if ((*r)->counters().accept_errors < 1) _exit(20);
    if (cpu > 0.3) _exit(21);  // spinning costs ~1.5 s of CPU in 1.5 s
    _exit(0);
  }
  int port = 0;
  ASSERT_EQ(::read(port_pipe[0], &port, sizeof port), ssize_t(sizeof port));
  std::vector<int> peers;
  for (int i = 0; i < 3; ++i) peers.push_back(raw_connect(port));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  for (int fd : peers) ::close(fd);
  ::close(port_pipe[0]);
  ::close(port_pipe[1]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "20: accept errors not counted; 21: more than 0.3 s of CPU in 1.5 s (spinning)";
}

}  // namespace
}  // namespace tlt::rl
