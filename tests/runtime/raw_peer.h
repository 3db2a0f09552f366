// A peer of the trainer's rendezvous port that speaks the protocol by hand (raw loopback
// sockets), for tests of what a peer without the job secret can and cannot do.
// Thread safety: functions; no shared state.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace tlt::rl::testing {

// A socket connected to 127.0.0.1:port (the kernel completes it before any accept), or -1.
inline int raw_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

inline bool send_text(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size());
}

// The next line from fd within timeout_ms, parsed; a null JSON on a timeout, an end or garbage.
// `pump` runs between waits (the side that must make progress for the line to come).
template <typename Pump>
nlohmann::json read_json_line(int fd, int timeout_ms, Pump pump) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pump();
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    char c;
    if (::recv(fd, &c, 1, 0) != 1) return nlohmann::json();
    if (c == '\n') return nlohmann::json::parse(line, nullptr, false);
    line.push_back(c);
  }
  return nlohmann::json();
}

// Whether the other side closes fd within timeout_ms (whatever it sent before is skipped).
template <typename Pump>
bool closed_within(int fd, int timeout_ms, Pump pump) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pump();
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    char buf[256];
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

}  // namespace tlt::rl::testing
