#include "runtime/rl/worker_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "runtime/clock.h"
#include "runtime/cluster/job_secret.h"
#include "runtime/process/child.h"

namespace tlt::rl {

namespace {

using runtime::now_s;

// How long a local worker told to exit may take before it is killed.
constexpr int kExitGraceMs = 1000;

// The parent's environment with one compute thread for BLIS and OpenMP: a worker plays one GPU
// with one core, and their pools would otherwise oversubscribe the pinned core.
std::vector<std::string> worker_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("BLIS_NUM_THREADS=", 0) != 0 && kv.rfind("OMP_NUM_THREADS=", 0) != 0)
      env.push_back(kv);
  }
  env.push_back("BLIS_NUM_THREADS=1");
  env.push_back("OMP_NUM_THREADS=1");
  return env;
}

}  // namespace

WorkerPool::WorkerPool(WorkerPoolOptions options, SetupFn setup, LogFn log)
    : options_(std::move(options)), setup_(std::move(setup)), log_(std::move(log)) {
  slots_.resize(size_t(std::max(0, options_.workers)));
}

Status WorkerPool::start(int64_t first_step) {
  for (int w = 0; w < size(); ++w)
    if (!optional(w)) TLT_RETURN_IF_ERROR(spawn(w));
  return await_drafter_pods(first_step);
}

Status WorkerPool::spawn(int w) {
  if (options_.listen_port > 0) return connect_remote(w);
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0)
    return Status::Unavailable("cannot create pipes for a rollout worker");
  process::ChildOptions child;
  child.exe = options_.worker_exe;
  child.argv = {"tlt", "rl-worker"};
  child.env = worker_environment();
  child.stdin_fd = to_child[0], child.stdout_fd = from_child[1];
  StatusOr<pid_t> pid = process::spawn(child);
  close(to_child[0]);
  close(from_child[1]);
  if (!pid.ok()) {
    close(to_child[1]), close(from_child[0]);
    return Status::Unavailable("cannot fork a rollout worker");
  }
  Slot& s = slots_[size_t(w)];
  s.pid = *pid, s.to = to_child[1], s.from = from_child[0];
  s.ch = std::make_unique<Channel>(s.from, s.to);
  return s.ch->send(setup_(w));
}

Status WorkerPool::open_rendezvous() {
  if (rendezvous_) return Status::Ok();
  std::string secret = options_.secret;
  if (secret.empty()) {
    StatusOr<std::string> loaded = cluster::load_job_secret();
    if (!loaded.ok()) return loaded.status();
    secret = *loaded;
  }
  RendezvousOptions ro;
  ro.port = options_.listen_port, ro.loopback = options_.listen_loopback;
  ro.secret = std::move(secret);
  ro.hello_timeout_ms = options_.hello_timeout_ms;
  ro.max_handshakes = options_.max_handshakes;
  StatusOr<std::unique_ptr<Rendezvous>> r = Rendezvous::listen(std::move(ro));
  if (!r.ok()) return r.status();
  rendezvous_ = std::move(*r);
  log("waiting for " + std::to_string(rollout_workers()) + " rollout workers on port " +
      std::to_string(options_.listen_port) + " (each proves the job secret)");
  return Status::Ok();
}

void WorkerPool::serve_rendezvous(int timeout_ms) {
  for (const JoinedWorker& j : rendezvous_->service(timeout_ms)) {
    if (j.index >= size()) {
      // A drafter pod beyond the slots this trainer started with (maxReplicas raised since): it
      // stays connected and unused rather than failing its pod.
      log("worker " + std::to_string(j.index) + " connected, but this job has " +
          std::to_string(size()) + " worker slots (spec.roles.drafter.maxReplicas when the " +
          "trainer started): it waits unused");
    }
    auto old = pending_.find(j.index);
    if (old != pending_.end()) ::close(old->second);  // a newer connection wins
    pending_[j.index] = j.fd;
  }
  log_refusals();
}

// One line for the connections closed unpaired since the last line, at most every 10 s: a peer
// that opens a connection a second must not flood the log.
void WorkerPool::log_refusals() {
  const RendezvousCounters& c = rendezvous_->counters();
  if ((c.unpaired() == unpaired_logged_ && c.accept_errors == accept_errors_logged_) ||
      now_s() - refusals_logged_at_ < 10)
    return;
  log("rendezvous: " + std::to_string(c.unpaired() - unpaired_logged_) +
      " connections closed without a valid hello (since the start: " + std::to_string(c.refused) +
      " refused (no proof of the job secret, or a wrong one), " + std::to_string(c.timed_out) +
      " silent for " + std::to_string(options_.hello_timeout_ms / 1000) + " s, " +
      std::to_string(c.dropped) + " dropped over " + std::to_string(options_.max_handshakes) +
      " awaiting a hello; " + std::to_string(c.accept_errors) + " accepts out of descriptors)");
  unpaired_logged_ = c.unpaired(), accept_errors_logged_ = c.accept_errors;
  refusals_logged_at_ = now_s();
}

Status WorkerPool::connect_remote(int w) {
  TLT_RETURN_IF_ERROR(open_rendezvous());
  std::string who = "rollout worker " + std::to_string(w);
  double deadline = now_s() + options_.connect_timeout_s;
  while (!pending_.count(w)) {
    if (stopping()) return Status::Aborted("stopped by signal while waiting for " + who);
    double left = deadline - now_s();
    if (left <= 0) {
      const RendezvousCounters& c = rendezvous_->counters();
      return Status::DeadlineExceeded(
          who + ": no rollout worker connected within " +
          std::to_string(options_.connect_timeout_s) + " s (" + std::to_string(c.unpaired()) +
          " connections closed without a valid hello: check that the pods hold the job's secret)");
    }
    serve_rendezvous(int(std::min(200.0, 1000 * left)) + 1);
  }
  int fd = pending_[w];
  pending_.erase(w);
  log(who + " connected");
  return attach(w, fd);
}

Status WorkerPool::attach(int w, int fd) {
  Slot& s = slots_[size_t(w)];
  s.pid = -1, s.to = fd, s.from = fd;
  s.ch = std::make_unique<Channel>(fd, fd);
  s.ch->mirror_files(options_.run_dir, driver_mirror_rules(w));
  return s.ch->send(setup_(w));
}

void WorkerPool::drop(int w, const std::string& why) {
  Slot& s = slots_[size_t(w)];
  if (s.to >= 0) close(s.to);
  s.pid = -1, s.to = s.from = -1;
  s.ch.reset();
  log("drafter pod " + std::to_string(w - rollout_workers()) + " (worker " + std::to_string(w) +
      ") left (" + why + "); the job goes on without it");
}

Status WorkerPool::restart(int w) {
  Slot& s = slots_[size_t(w)];
  if (s.pid > 0) waitpid(s.pid, nullptr, 0);
  close(s.to);
  if (s.from != s.to) close(s.from);
  s.pid = -1;
  return spawn(w);
}

Status WorkerPool::await_drafter_pods(int64_t first_step) {
  int drafter_slots = size() - rollout_workers();
  if (options_.listen_port <= 0 || drafter_slots <= 0) return Status::Ok();
  int expected = options_.drafter_pods_at_start < 0
                     ? drafter_slots
                     : std::min(options_.drafter_pods_at_start, drafter_slots);
  auto missing = [&] {
    for (int w = rollout_workers(); w < rollout_workers() + expected; ++w)
      if (!pending_.count(w)) return true;
    return false;
  };
  TLT_RETURN_IF_ERROR(open_rendezvous());
  double deadline = now_s() + options_.drafter_start_grace_s;
  while (missing() && now_s() < deadline) {
    if (stopping()) return Status::Aborted("stopped by signal while waiting for drafter pods");
    serve_rendezvous(int(std::min(200.0, 1000 * (deadline - now_s()))) + 1);
  }
  if (missing())
    log("not every drafter pod connected within " + std::to_string(options_.drafter_start_grace_s) +
        " s; the job starts without the missing ones, which join at a step boundary");
  admit_drafter_pods(first_step);
  return Status::Ok();
}

// A present drafter pod whose connection ended between steps (nothing left to read from it).
bool WorkerPool::hung_up(int64_t w) {
  pollfd p{slots_[size_t(w)].from, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) &&
         !channel(w).pump().ok() && !channel(w).has_buffered();
}

void WorkerPool::admit_drafter_pods(int64_t step) {
  if (options_.listen_port <= 0 || !rendezvous_) return;
  serve_rendezvous(0);
  for (int w = rollout_workers(); w < size(); ++w) {
    if (present(w)) {  // still there? (a pod that went away between steps)
      if (hung_up(w)) {
        drop(w, "hung up between steps");
      } else if (pending_.count(w)) {
        drop(w, "connected again");  // its pod restarted: the new connection wins
      }
    }
    if (present(w) || !pending_.count(w)) continue;
    int fd = pending_[w];
    pending_.erase(w);
    log("drafter pod " + std::to_string(w - rollout_workers()) + " (worker " + std::to_string(w) +
        ") joined at step " + std::to_string(step));
    Status st = attach(w, fd);
    if (!st.ok()) drop(w, st.message());
  }
}

Status WorkerPool::send(int64_t w, const nlohmann::json& m) {
  if (optional(w) && !present(w)) return Status::Ok();
  Status st = channel(w).send(m);
  if (st.ok() || optional(w)) return Status::Ok();
  // A rollout worker that died between its last message and this one (a pod deleted at a step
  // boundary): its connection's end shows up in the step's poll, which restarts it and sends
  // its requests again. Any other failure (a file that cannot be mirrored) is the job's.
  if (st.code() == StatusCode::kUnavailable) {
    log("rollout worker " + std::to_string(w) + ": " + st.message() + "; restarting it");
    return Status::Ok();
  }
  return st;
}

StatusOr<std::vector<int>> WorkerPool::wait_readable(int timeout_ms) {
  std::vector<pollfd> fds;
  for (const Slot& s : slots_) fds.push_back({s.from, POLLIN, 0});  // absent: -1, ignored
  if (rendezvous_) rendezvous_->add_pollfds(&fds);  // handshakes advance while workers run
  int pr = poll(fds.data(), fds.size(), timeout_ms);
  if (pr < 0 && errno != EINTR) return Status::Internal("poll failed");
  if (rendezvous_) serve_rendezvous(0);
  std::vector<int> ready;
  for (size_t w = 0; w < slots_.size(); ++w)
    if (fds[w].revents & (POLLIN | POLLHUP | POLLERR)) ready.push_back(int(w));
  return ready;
}

int64_t WorkerPool::take_unpaired() {
  if (!rendezvous_) return 0;
  int64_t now = rendezvous_->counters().unpaired(), taken = now - unpaired_taken_;
  unpaired_taken_ = now;
  return taken;
}

RendezvousCounters WorkerPool::connection_counters() const {
  return rendezvous_ ? rendezvous_->counters() : RendezvousCounters{};
}

void WorkerPool::shutdown() {
  for (auto& [index, fd] : pending_) close(fd);
  pending_.clear();
  rendezvous_.reset();
  for (Slot& s : slots_) {
    if (s.pid <= 0 && s.to >= 0) {  // remote: say goodbye and hang up
      if (s.ch) (void)s.ch->send({{"op", "exit"}});
      close(s.to);
      s.to = s.from = -1;
    }
    if (s.pid <= 0) continue;
    if (s.ch) (void)s.ch->send({{"op", "exit"}});
    close(s.to);
    process::stop_after_grace(s.pid, kExitGraceMs);
    close(s.from);
    s.pid = -1, s.to = s.from = -1;  // a second shutdown() closes nothing twice
    s.ch.reset();
  }
}

}  // namespace tlt::rl
