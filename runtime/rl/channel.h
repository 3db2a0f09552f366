// Newline-delimited JSON messages over a pair of pipe file descriptors (or one socket): how the
// RL job driver and its worker processes talk. Bulk data (weights, hidden states) goes through
// files named in the messages.
//
// Between machines (a cluster job's pods: mirror_files()), the files a message names travel
// with it: before the message, each named file (fields "policy", "drafter", "buffer" and the
// array "buffers") that lies under the sender's directory and was not sent before in this
// state (name, size, modification time) goes as a frame {"op":"file","rel":R,"size":N} + N raw
// bytes, which the receiver writes under its own directory (atomically, by rename) before it
// delivers the message; in the message itself such paths, and the field "dir" when it is the
// sender's directory, are rewritten to the receiver's directory.
//
// Errors: send() returns Unavailable when the peer is gone, and only then (EPIPE, ECONNRESET;
// SIGPIPE must be ignored by the process); FailedPrecondition when a file it mirrors cannot be
// read. receive() returns Unavailable at end of file (the peer exited or was killed) and
// Corruption for a line that is not JSON.
// Thread safety: one thread per Channel. The Channel does not own or close its descriptors.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::rl {

class Channel {
 public:
  Channel(int in_fd, int out_fd) : in_(in_fd), out_(out_fd) {}

  // Turns on file mirroring (see the top) with `dir` as this side's directory. Corruption on
  // receive for a frame whose name leaves the directory; Unavailable when a file cannot be
  // read or written.
  void mirror_files(std::string dir) { mirror_dir_ = std::move(dir); }

  Status send(const nlohmann::json& message);
  // Mirroring: the peer already holds `path`'s contents as they are now (the weight-sync group
  // delivered them), so later messages name it without sending it. No-op when not mirroring,
  // for a path outside this side's directory, or for a missing file.
  void mark_mirrored(const std::string& path);
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
  Status write_all(const char* data, size_t n);
  // Mirroring: sends the files `m` names and rewrites their paths; maps received paths back.
  StatusOr<nlohmann::json> outgoing(const nlohmann::json& m);
  Status send_file(const std::string& path);
  void incoming(nlohmann::json* m) const;
  int in_, out_;
  std::string partial_;
  std::string mirror_dir_;                     // "" when not mirroring
  std::map<std::string, std::string> sent_;    // rel -> "size:mtime" last sent
  std::optional<nlohmann::json> file_header_;  // a file frame whose bytes are still coming
  std::deque<nlohmann::json> ready_;
  bool eof_ = false;
};

}  // namespace tlt::rl
