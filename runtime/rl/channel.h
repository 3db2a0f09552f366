// Newline-delimited JSON messages over a pair of pipe file descriptors: how the RL job driver
// and its worker processes talk. Bulk data (weights, hidden states) goes through files named in
// the messages, never through the pipe.
//
// Errors: send() returns Unavailable when the peer is gone (EPIPE; SIGPIPE must be ignored by
// the process). receive() returns Unavailable at end of file (the peer exited or was killed) and
// Corruption for a line that is not JSON.
// Thread safety: one thread per Channel. The Channel does not own or close its descriptors.
#pragma once

#include <deque>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::rl {

class Channel {
 public:
  Channel(int in_fd, int out_fd) : in_(in_fd), out_(out_fd) {}

  Status send(const nlohmann::json& message);
  // The next message, waiting at most timeout_ms (-1: forever); nullopt on timeout.
  StatusOr<std::optional<nlohmann::json>> receive(int timeout_ms);
  // Whether a complete message is already buffered (no system call).
  bool has_buffered() const { return !ready_.empty(); }
  // Reads what the descriptor has now without blocking; for callers that poll() themselves.
  Status pump();
  std::optional<nlohmann::json> pop();
  int in_fd() const { return in_; }

 private:
  Status split_lines();
  int in_, out_;
  std::string partial_;
  std::deque<nlohmann::json> ready_;
  bool eof_ = false;
};

}  // namespace tlt::rl
