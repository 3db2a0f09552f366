#include "runtime/rl/rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

namespace tlt::rl {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reads one line (the hello) from `fd` within timeout_ms, byte by byte so that nothing after it
// is consumed (the Channel reads the rest).
StatusOr<std::string> read_line(int fd, int timeout_ms) {
  std::string line;
  int64_t deadline = now_ms() + timeout_ms;
  while (line.size() < 4096) {
    pollfd p{fd, POLLIN, 0};
    int left = int(std::max<int64_t>(0, deadline - now_ms()));
    int r = ::poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return Status::DeadlineExceeded("no hello from a connecting worker");
    char c;
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Unavailable("a connecting worker hung up before its hello");
    if (c == '\n') return line;
    line.push_back(c);
  }
  return Status::Corruption("a connecting worker sent no hello line");
}

}  // namespace

StatusOr<int> listen_tcp(int port, bool loopback) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Status::Unavailable("cannot listen on port " + std::to_string(port) + ": " + why);
  }
  return fd;
}

StatusOr<std::pair<int, int>> accept_worker(int listen_fd, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    pollfd p{listen_fd, POLLIN, 0};
    int left = int(std::max<int64_t>(0, deadline - now_ms()));
    int r = ::poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0)
      return Status::DeadlineExceeded("no rollout worker connected within " +
                                      std::to_string(timeout_ms / 1000) + " s");
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    StatusOr<std::string> line = read_line(fd, 10000);
    nlohmann::json hello =
        line.ok() ? nlohmann::json::parse(*line, nullptr, false) : nlohmann::json();
    if (!hello.is_object() || hello.value("op", "") != "hello" || !hello.contains("index") ||
        !hello["index"].is_number_integer()) {
      ::close(fd);  // not one of ours, or gone: wait for the next
      continue;
    }
    return std::make_pair(fd, hello["index"].get<int>());
  }
}

StatusOr<int> connect_worker(const std::string& host, int port, int index, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  std::string last = "not tried";
  while (now_ms() < deadline) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int g = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (g != 0) {
      last = std::string("resolve ") + host + ": " + gai_strerror(g);
    } else {
      int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        ::freeaddrinfo(res);
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::string hello = nlohmann::json({{"op", "hello"}, {"index", index}}).dump() + "\n";
        if (::write(fd, hello.data(), hello.size()) == ssize_t(hello.size())) return fd;
        last = "hello not sent";
        ::close(fd);
      } else {
        last = std::string("connect: ") + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        ::freeaddrinfo(res);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return Status::DeadlineExceeded("cannot reach the trainer at " + host + ":" +
                                  std::to_string(port) + " (" + last + ")");
}

}  // namespace tlt::rl
