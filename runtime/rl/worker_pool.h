// The RL driver's workers (runtime/rl/run.h): who they are, how they are started, reached,
// restarted and let go. Slot w < rollout_workers is a rollout worker; the slots after it are
// drafter slots (dedicated drafter trainers).
//
// Local (listen_port 0): every slot is a child process `tlt rl-worker` on two pipes, pinned to a
// core by its setup message; it inherits this process's environment (TLT_JOB_SECRET included).
// Remote (listen_port > 0): the workers are a cluster job's pods that connect over TCP and say
// which slot they are in a hello that proves the job secret (runtime/rl/rendezvous.h); files
// named in messages travel with them, each side taking only the files the protocol sends it
// (Channel::mirror_files with driver_mirror_rules(w)). Connections in handshake are advanced
// without blocking whenever the pool waits (start, restart, admit_drafter_pods, wait_readable),
// so that no peer can stall a step; a connection that proves nothing is closed and counted
// (take_unpaired(), and a log line at most every 10 s). A worker that proved the secret for an
// index it had before replaces the old connection. Rollout workers are required: start() waits
// for each, and a dead one is restarted (remote: waited for until it connects again). Drafter
// slots are optional (drafter pods come and go with the rebalancer's scaling): start() waits for
// the pods present at the start for a grace period only; later ones join at a step boundary
// (admit_drafter_pods); one that hangs up is dropped.
//
// Every worker gets its setup message (the `setup` callback) first, on each (re)start.
//
// Errors: start() and restart() return Unavailable when a process or pipe cannot be made, the
// rendezvous' errors (Unavailable for a port that cannot be bound, NotFound or InvalidArgument
// for a missing or short job secret, DeadlineExceeded when a rollout worker does not connect
// within connect_timeout_s) naming the worker, Aborted when `stop` is set while they wait, or
// the send error of the setup message. send() is Ok for an absent drafter slot and for a rollout
// worker whose peer is gone (its end shows up in the next poll); other failures are the caller's.
// Ownership: the pool owns its processes, pipes and sockets and closes them in shutdown().
// Thread safety: one thread (the driver's).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "runtime/rl/channel.h"
#include "runtime/rl/rendezvous.h"

namespace tlt::rl {

struct WorkerPoolOptions {
  int workers = 2;                 // all slots, drafter slots included
  int rollout_workers = 2;         // the first this-many slots (at least 1)
  std::string worker_exe;          // local: the `tlt` binary run as `tlt rl-worker`
  std::string run_dir;             // remote: the directory mirrored files land in
  int listen_port = 0;             // > 0: remote workers connect to this port
  bool listen_loopback = false;    // listen on 127.0.0.1 only (tests)
  int connect_timeout_s = 600;     // how long a rollout worker may take to (re)connect
  int drafter_pods_at_start = -1;  // remote: drafter pods awaited at the start (-1: every slot)
  int drafter_start_grace_s = 60;  // ... for at most this long
  // Remote: the job secret the workers' hellos prove; "" reads it (cluster::load_job_secret).
  std::string secret;
  int hello_timeout_ms = 10000;  // remote: from a connection's accept to its complete hello
  int max_handshakes = 64;       // remote: connections awaiting their hello at once
  // Set (by a signal handler) to stop: waits for workers end with Aborted. Borrowed; may be null.
  const std::atomic<bool>* stop = nullptr;
};

class WorkerPool {
 public:
  using SetupFn = std::function<nlohmann::json(int worker)>;
  using LogFn = std::function<void(const std::string&)>;

  WorkerPool(WorkerPoolOptions options, SetupFn setup, LogFn log);
  ~WorkerPool() { shutdown(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts every rollout worker and, remote, awaits the drafter pods of the start (see the top),
  // admitting them for step `first_step`.
  Status start(int64_t first_step);
  // Remote, at a step boundary: drafter pods that connected since are attached, those that hung
  // up (or connected again) dropped. No-op for local workers.
  void admit_drafter_pods(int64_t step);
  // Restarts rollout worker w after it died (reaps and closes the old one first).
  Status restart(int w);
  // Lets drafter slot w go (its pod left); the slot is absent until a pod connects again.
  void drop(int w, const std::string& why);
  // Says goodbye to every worker, reaps the local ones (SIGKILL after 1 s) and closes sockets.
  void shutdown();

  int size() const { return options_.workers; }
  int rollout_workers() const { return options_.rollout_workers; }
  // A drafter slot of remote workers: it may be absent.
  bool optional(int64_t w) const { return options_.listen_port > 0 && w >= rollout_workers(); }
  bool present(int64_t w) const { return slots_[size_t(w)].ch != nullptr; }
  pid_t pid(int64_t w) const { return slots_[size_t(w)].pid; }  // -1: remote or none

  Status send(int64_t w, const nlohmann::json& message);
  // The workers whose descriptor has input, an end or an error within timeout_ms (absent slots
  // never); Internal when poll fails.
  StatusOr<std::vector<int>> wait_readable(int timeout_ms);
  // Worker w's channel (present(w) must hold).
  Channel& channel(int64_t w) { return *slots_[size_t(w)].ch; }
  // Remote: connections closed without pairing (no valid hello in time, or dropped over the
  // handshake cap) since the last call; 0 for local workers.
  int64_t take_unpaired();
  // Remote: the rendezvous' counters since the start (all zero for local workers).
  RendezvousCounters connection_counters() const;

 private:
  struct Slot {
    pid_t pid = -1;
    int to = -1, from = -1;
    std::unique_ptr<Channel> ch;
  };
  Status spawn(int w);
  Status connect_remote(int w);
  Status open_rendezvous();
  // Remote: advances the handshakes (waiting at most timeout_ms); joined workers go to pending_.
  void serve_rendezvous(int timeout_ms);
  void log_refusals();
  bool stopping() const { return options_.stop && options_.stop->load(); }
  Status attach(int w, int fd);  // pairs slot w with a connection and sends its setup
  Status await_drafter_pods(int64_t first_step);
  bool hung_up(int64_t w);
  void log(const std::string& s) const {
    if (log_) log_(s);
  }

  WorkerPoolOptions options_;
  SetupFn setup_;
  LogFn log_;
  std::vector<Slot> slots_;
  std::unique_ptr<Rendezvous> rendezvous_;  // remote, once listening
  std::map<int, int> pending_;  // remote: proved the secret, not yet paired: index -> socket
  int64_t unpaired_taken_ = 0;  // RendezvousCounters::unpaired() at the last take_unpaired()
  int64_t unpaired_logged_ = 0, accept_errors_logged_ = 0;  // ... at the last log line
  double refusals_logged_at_ = -1e9;
};

}  // namespace tlt::rl
