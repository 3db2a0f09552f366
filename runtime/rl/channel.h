// Newline-delimited JSON messages over a pair of pipe file descriptors (or one socket): how the
// RL job driver and its worker processes talk. Bulk data (weights, hidden states) goes through
// files named in the messages. Every line is parsed with a nesting limit (api/json_bounded.h).
//
// Between machines (a cluster job's pods: mirror_files()), the files a message names travel
// with it: before the message, each named file (fields "policy", "drafter", "buffer" and the
// array "buffers") that lies under the sender's directory and was not sent before in this
// state (name, size, modification time) goes as a frame {"op":"file","rel":R,"size":N} + N raw
// bytes; in the message itself such paths become "@/R" and the field "dir", when it is the
// sender's directory, "@"; the receiver maps them back to its own directory.
//
// The receiver takes only the files its rules (MirrorRule) allow, so that a peer cannot write
// outside what the protocol needs (a worker never writes the driver's policy-v*.ckpt):
//   - a frame whose name matches no rule's pattern is Corruption at once;
//   - received files wait, in memory, for the next message, which must name each of them in a
//     field that a rule allows for the message's op, with a matching name; otherwise Corruption
//     and none of them is written; else they are written under the receiver's directory
//     (atomically, by rename) and then the message is delivered;
//   - in a message, each of those fields must be "" or name ("@/R") a file a rule allows for
//     that op and field: a path outside the receiver's directory, or a name no rule allows, is
//     Corruption.
//
// Errors: send() returns Unavailable when the peer is gone, and only then (EPIPE, ECONNRESET;
// SIGPIPE must be ignored by the process); FailedPrecondition when a file it mirrors cannot be
// read. receive() and pump() return Unavailable at end of file (the peer exited or was killed),
// Corruption for a line that is not JSON or nests too deep, and for the mirroring refusals above;
// after a Corruption the Channel's state is undefined (the caller drops the peer).
// Thread safety: one thread per Channel. The Channel does not own or close its descriptors.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::rl {

// A receiver's permission: a message of op `op` may name, in field `field` ("policy", "drafter",
// "buffer", or an element of "buffers"), a file of its directory whose relative name matches
// `pattern`, where '#' stands for one or more decimal digits and every other character for itself.
struct MirrorRule {
  std::string op, field, pattern;
};

// What a worker takes from the driver: a generate message's policy (policy-v#.ckpt) and drafter
// (drafter-v#.ckpt), a train message's buffers (buffer/step-#-w#.pt).
std::vector<MirrorRule> worker_mirror_rules();
// What the driver takes from worker `index`: its generated reply's hidden-state buffer
// (buffer/step-#-w<index>.pt) and its trained reply's drafter part (drafter-w<index>.ckpt).
std::vector<MirrorRule> driver_mirror_rules(int index);

class Channel {
 public:
  Channel(int in_fd, int out_fd) : in_(in_fd), out_(out_fd) {}

  // Turns on file mirroring (see the top) with `dir` as this side's directory, receiving only
  // the files `accept` allows. Unavailable on receive when a file cannot be written.
  void mirror_files(std::string dir, std::vector<MirrorRule> accept) {
    mirror_dir_ = std::move(dir);
    accept_ = std::move(accept);
  }

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
  // Mirroring: checks `m` against the rules, writes the files it names, maps its paths back.
  Status incoming(nlohmann::json* m);
  bool allowed(const std::string& op, const std::string& field, const std::string& rel) const;
  Status take_file_frame(nlohmann::json header, const std::string& line);
  int in_, out_;
  std::string partial_;
  std::string mirror_dir_;                     // "" when not mirroring
  std::vector<MirrorRule> accept_;             // mirroring: the files this side takes
  std::map<std::string, std::string> sent_;    // rel -> "size:mtime" last sent
  std::optional<nlohmann::json> file_header_;  // a file frame whose bytes are still coming
  std::vector<std::pair<std::string, std::string>> received_;  // rel, bytes: await a message
  std::deque<nlohmann::json> ready_;
  bool eof_ = false;
};

}  // namespace tlt::rl
