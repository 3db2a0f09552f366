// TCP rendezvous between a cluster RLJob's trainer pod (the driver, listening) and its rollout
// and drafter pods (workers, connecting): the socket then carries the driver <-> worker Channel
// (runtime/rl/channel.h) with file mirroring on.
//
// Handshake (each line one JSON object and '\n'; a worker that comes back, its pod restarted,
// connects again the same way):
//   driver -> worker  {"op":"challenge","nonce":N}          N: 32 fresh hex digits per connection
//   worker -> driver  {"op":"hello","index":I,"proof":P}    P = hello_proof(secret, N, I)
//   driver -> worker  {"op":"welcome"}  then the Channel's messages (the setup message first),
//                 or  {"op":"refused","reason":R}  and the driver hangs up.
// The secret is the job's (runtime/cluster/job_secret.h): only the job's own pods hold it, so a
// peer that cannot compute P for this connection's nonce (no secret, a wrong one, or a hello
// replayed from another connection) is closed; nothing it sent is used.
//
// The listening side never blocks on a peer: Rendezvous keeps every accepted connection whose
// hello is not complete in a bounded set, each with a deadline, and service() advances them all
// without waiting on any (poll, then non-blocking reads). Beyond max_handshakes the oldest is
// dropped; accept() failing for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)
// stops accepting for accept_backoff_ms instead of spinning. Every connection closed without a
// valid hello is counted (counters()).
//
// Errors: Rendezvous::listen: Unavailable when the port cannot be bound, InvalidArgument for a
// secret shorter than 16 bytes. connect_worker: InvalidArgument when the driver refused the proof
// (the secret differs from the trainer's: retrying cannot help), DeadlineExceeded after retrying
// until the deadline (the trainer pod may start later, or an older trainer sends no challenge).
// Ownership: a Rendezvous owns its listening socket and the connections in handshake and closes
// them when destroyed; a descriptor returned by service() or connect_worker() belongs to the
// caller (close it).
// Thread safety: a Rendezvous is used by one thread; the free functions share no state.
#pragma once

#include <poll.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::rl {

// The string a hello proves: binds the purpose (so a proof made for another use of the secret,
// such as the weight-sync group's, never passes here), the connection's nonce and the index.
std::string hello_proof(const std::string& secret, const std::string& nonce, int index);

struct RendezvousOptions {
  int port = 29500;              // 0: a port the kernel picks (tests; see Rendezvous::port())
  bool loopback = false;         // listen on 127.0.0.1 only (tests)
  std::string secret;            // the job secret every hello proves (at least 16 bytes)
  int hello_timeout_ms = 10000;  // from accept to a complete hello
  int max_handshakes = 64;       // connections awaiting their hello at once
  int accept_backoff_ms = 1000;  // no accept() for this long after it ran out of descriptors
};

// Connections the listening side closed without pairing, since it started.
struct RendezvousCounters {
  int64_t accepted = 0;       // connections accepted
  int64_t joined = 0;         // hellos that proved the secret (returned by service())
  int64_t refused = 0;        // no hello, a malformed one, a missing or wrong proof, a hang-up
  int64_t timed_out = 0;      // no complete hello within hello_timeout_ms
  int64_t dropped = 0;        // the oldest handshake, closed to keep max_handshakes
  int64_t accept_errors = 0;  // accept() out of descriptors or memory (each starts a backoff)
  // Every connection that was closed unpaired.
  int64_t unpaired() const { return refused + timed_out + dropped; }
};

// A worker whose hello proved the secret: its socket (the caller's to close) and its index.
struct JoinedWorker {
  int fd = -1;
  int index = 0;
};

class Rendezvous {
 public:
  static StatusOr<std::unique_ptr<Rendezvous>> listen(RendezvousOptions options);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Appends the descriptors service() waits on (the listening socket unless backing off, and
  // each handshake), for a caller that polls them together with its own.
  void add_pollfds(std::vector<pollfd>* fds) const;
  // Waits at most timeout_ms (0: not at all) for any of them, then reads what the handshakes
  // sent, verifies complete hellos, closes expired ones and accepts up to max_handshakes waiting
  // connections (each challenged at once). Returns the workers that joined, in the order their
  // hellos completed.
  std::vector<JoinedWorker> service(int timeout_ms);

  const RendezvousCounters& counters() const { return counters_; }
  int port() const { return port_; }
  int handshakes() const { return int(handshakes_.size()); }

 private:
  struct Handshake {
    int fd = -1;
    std::string nonce;
    int64_t deadline_ms = 0;
  };
  Rendezvous(RendezvousOptions options, int listen_fd, int port);
  void accept_waiting();
  // Reads fd's hello if it has arrived: true when the handshake ended (joined or closed).
  bool advance(const Handshake& h, std::vector<JoinedWorker>* joined);
  void refuse(int fd, const std::string& reason);
  void drop_oldest();

  const RendezvousOptions options_;
  const int listen_fd_;
  const int port_;
  std::deque<Handshake> handshakes_;  // oldest first
  int64_t backoff_until_ms_ = 0;
  RendezvousCounters counters_;
};

// Connects to host:port (retrying every 500 ms for up to timeout_ms while the trainer cannot be
// reached or hangs up), answers its challenge as worker `index` with a proof made from `secret`
// and returns the socket once welcomed.
StatusOr<int> connect_worker(const std::string& host, int port, int index,
                             const std::string& secret, int timeout_ms);

}  // namespace tlt::rl
