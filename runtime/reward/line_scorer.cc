// The command source: JSON lines with the user's program, a child process or the FIFOs of one
// already running (contracts: runtime/reward/scorer.h).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "api/json_bounded.h"
#include "api/validate.h"
#include "runtime/clock.h"
#include "runtime/reward/sources.h"

extern char** environ;

namespace tlt::reward {
namespace {

constexpr size_t kMaxLine = size_t(1) << 20;  // a longer output line is garbage
constexpr size_t kMaxNanLine = 1024;          // the longest line read as a NaN/Infinity answer
constexpr int64_t kMaxLoggedOutput = 200;     // stdout lines that are not answers, logged

using runtime::now_s;

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Where requests go and rewards come from: open() yields two non-blocking descriptors.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual Status open(int* to_program, int* from_program) = 0;
  // Closes both descriptors and, for a child process, stops it.
  virtual void close(int* to_program, int* from_program) = 0;
  // Why the program's output ended ("exited with status 3"), for the error.
  virtual std::string why_closed() { return "closed its output"; }
  virtual std::string field() const { return "spec.reward.command"; }
};

void close_fd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

class ProcessTransport : public Transport {
 public:
  explicit ProcessTransport(std::vector<std::string> argv) : argv_(std::move(argv)) {}
  ~ProcessTransport() override { reap(true); }

  Status open(int* to, int* from) override {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0)
      return Status::Unavailable(std::string("pipe: ") + strerror(errno));
    if (pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]), ::close(in[1]);
      return Status::Unavailable(std::string("pipe: ") + strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<char*> args, envp;
    for (auto& a : argv_) args.push_back(a.data());
    args.push_back(nullptr);
    std::vector<std::string> env = program_environment();
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int rc = posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]), ::close(out[1]);
    if (rc != 0) {
      pid_ = -1;
      ::close(in[1]), ::close(out[0]);
      return Status::Unavailable("spec.reward.command: cannot start " + argv_[0] + ": " +
                                 strerror(rc));
    }
    *to = in[1], *from = out[0];
    set_nonblocking(*to), set_nonblocking(*from);
    return Status::Ok();
  }

  void close(int* to, int* from) override {
    close_fd(to), close_fd(from);
    reap(true);
  }

  std::string why_closed() override {
    for (int i = 0; i < 50 && pid_ > 0 && status_ < 0; ++i) {  // give it 0.5 s to be reaped
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = st;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (status_ < 0) return "closed its stdout";
    if (WIFEXITED(status_))
      return "exited with status " + std::to_string(WEXITSTATUS(status_)) +
             " (its stderr, in the job's log, usually says why)";
    return "was killed by signal " + std::to_string(WTERMSIG(status_));
  }

 private:
  // Stops the program (SIGKILL unless it already exited) and reaps it.
  void reap(bool kill_it) {
    if (pid_ <= 0) return;
    if (status_ < 0) {
      if (kill_it) kill(pid_, SIGKILL);
      int st = 0;
      while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
    }
    pid_ = -1, status_ = -1;
  }

  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  int status_ = -1;  // waitpid's status once reaped
};

class FifoTransport : public Transport {
 public:
  FifoTransport(std::string dir, double timeout_s) : dir_(std::move(dir)), timeout_s_(timeout_s) {}

  Status open(int* to, int* from) override {
    TLT_RETURN_IF_ERROR(make_fifo(dir_ + "/requests"));
    TLT_RETURN_IF_ERROR(make_fifo(dir_ + "/rewards"));
    // The read side opens at once; the write side needs a reader: the program, awaited.
    *from = ::open((dir_ + "/rewards").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*from < 0) return fail(dir_ + "/rewards");
    double end = now_s() + timeout_s_;
    while ((*to = ::open((dir_ + "/requests").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
      if (errno != ENXIO || now_s() > end) {
        close_fd(from);
        return errno == ENXIO ? Status::Unavailable(field() + ": no program reads " + dir_ +
                                                    "/requests within spec.reward.timeout")
                              : fail(dir_ + "/requests");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Status::Ok();
  }
  void close(int* to, int* from) override { close_fd(to), close_fd(from); }
  std::string why_closed() override { return "closed " + dir_ + "/rewards"; }
  std::string field() const override {
    return "spec.reward.command (through TLT_REWARD_PIPE_DIR=" + dir_ + ")";
  }

 private:
  Status make_fifo(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      if (S_ISFIFO(st.st_mode)) return Status::Ok();
      return Status::Unavailable(field() + ": " + path + " exists and is not a FIFO");
    }
    if (mkfifo(path.c_str(), 0600) != 0 && errno != EEXIST) return fail(path);
    return Status::Ok();
  }
  Status fail(const std::string& path) {
    return Status::Unavailable(field() + ": " + path + ": " + strerror(errno));
  }

  std::string dir_;
  double timeout_s_;
};

class LineScorer : public Scorer {
 public:
  LineScorer(std::unique_ptr<Transport> t, const api::RewardSpec& spec)
      : t_(std::move(t)),
        timeout_s_(spec.timeout.seconds),
        startup_s_(std::max(spec.timeout.seconds, spec.startup_timeout.seconds)),
        retries_(spec.retries) {}

  Status open() {
    TLT_RETURN_IF_ERROR(t_->open(&to_, &from_));
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
      return Status::Unavailable(std::string("pipe: ") + strerror(errno));
    thread_ = std::thread([this] { loop(); });
    return Status::Ok();
  }

  ~LineScorer() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake();
    if (thread_.joinable()) thread_.join();
    close_fd(&to_);  // end of input: a well-behaved program exits; close() kills it otherwise
    t_->close(&to_, &from_);
    close_fd(&wake_[0]), close_fd(&wake_[1]);
  }

 protected:
  void start(size_t slot, ScoreRequest request) override;
  void on_begin() override {
    std::lock_guard<std::mutex> lock(mu_);
    restarts_ = 0;
  }

 private:
  struct Pending {
    size_t slot;
    std::string line;
  };
  void wake() {
    char c = 1;
    if (wake_[1] >= 0) (void)!write(wake_[1], &c, 1);
  }
  void loop();
  // Each returns false after a failure of the program (restarted or given up).
  bool read_rewards();
  bool write_requests();
  bool take_line(const std::string& line);
  void program_output(const std::string& line);
  void value_error(const std::string& id, const Status& why);
  void attempt_failed(const std::string& why);
  // The longest wait for the next reward: the start-up allowance until the program has answered.
  double allowance() const { return answered_ ? timeout_s_ : startup_s_; }
  std::string timeout_reason() const;

  std::unique_ptr<Transport> t_;
  double timeout_s_;
  double startup_s_;  // max(spec.reward.timeout, spec.reward.startupTimeout)
  int retries_;
  int to_ = -1, from_ = -1, wake_[2] = {-1, -1};
  std::thread thread_;
  std::mutex mu_;                           // everything below
  std::map<std::string, Pending> pending_;  // unanswered, by id
  std::deque<std::string> outq_;            // ids not yet written, in order
  std::string wbuf_, rbuf_;
  double progress_ = 0;      // last reward, or when the first owed request was submitted
  int restarts_ = 0;         // this batch's
  bool answered_ = false;    // the program answered since it (re)started
  int64_t n_output_ = 0;     // stdout lines that were not answers
  std::string last_output_;  // the last of them, cut to 200 bytes
  Status broken_;
  bool stop_ = false;
};

void LineScorer::start(size_t slot, ScoreRequest request) {
  StatusOr<nlohmann::json> j = request_json(request);
  if (!j.ok()) return finish(slot, j.status());
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.ok()) return finish(slot, broken_);
  if (pending_.count(request.id))
    return finish(slot, Status::Internal("reward: id " + request.id + " submitted twice"));
  if (pending_.empty()) progress_ = now_s();
  pending_[request.id] =
      Pending{slot, j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
  outq_.push_back(request.id);
  lock.unlock();
  wake();
}

void LineScorer::value_error(const std::string& id, const Status& why) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  size_t slot = it->second.slot;
  pending_.erase(it);
  finish(slot, why);
}

// One output line; false on a protocol failure (already handled).
bool LineScorer::take_line(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return true;
  if (api::json_depth(line) > api::kMaxJsonDepth) {
    attempt_failed("printed a line of JSON nested deeper than " +
                   std::to_string(api::kMaxJsonDepth) + " levels: " + line.substr(0, 200));
    return false;
  }
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  const std::string field = t_->field();
  if (j.is_discarded()) {
    // Python's json.dumps writes NaN and Infinity, which JSON lacks: a value error, not garbage.
    // Such an answer is short; std::regex recurses once per character, so longer lines are
    // garbage without being searched.
    static const std::regex nan(R"re("id"\s*:\s*"([^"]*)".*"reward"\s*:\s*(-?(NaN|Infinity)))re");
    std::smatch m;
    if (line.size() <= kMaxNanLine && std::regex_search(line, m, nan) &&
        pending_.count(m[1].str())) {
      value_error(m[1].str(),
                  Status::InvalidArgument(field + ": the reward for id \"" + m[1].str() + "\" is " +
                                          m[2].str() + " (must be a finite number)"));
      progress_ = now_s();
      answered_ = true;
      return true;
    }
    program_output(line);
    return true;
  }
  if (!j.is_object() || !j.contains("id")) {
    program_output(line);
    return true;
  }
  if (!j["id"].is_string()) {
    attempt_failed("printed an answer whose \"id\" is not a string: " + line.substr(0, 200) +
                   " (echo each request's \"id\" as it came)");
    return false;
  }
  const std::string id = j["id"].get<std::string>();
  if (!pending_.count(id)) {
    attempt_failed("answered id \"" + id +
                   "\", which is unknown or already answered (answer each request once, "
                   "with its own \"id\")");
    return false;
  }
  answered_ = true;
  progress_ = now_s();
  if (!j.contains("reward")) {
    value_error(id, Status::InvalidArgument(field + ": the answer for id \"" + id +
                                            "\" has no \"reward\""));
    return true;
  }
  StatusOr<double> r = check_reward(j["reward"], field, id);
  size_t slot = pending_[id].slot;
  pending_.erase(id);
  finish(slot, r);
  return true;
}

// A stdout line that is not an answer (a banner printed at import, a debug print): the program's
// output, logged with a warning the first time; it fails nothing.
void LineScorer::program_output(const std::string& line) {
  ++n_output_;
  last_output_ = line.substr(0, 200);
  const std::string field = t_->field();
  if (n_output_ == 1)
    std::fprintf(stderr,
                 "reward: warning: %s printed a line on stdout that is not an answer {\"id\", "
                 "\"reward\"}: it is logged below as the program's output and skipped; stdout "
                 "is for answers, print anything else to stderr (print(..., file=sys.stderr))\n",
                 field.c_str());
  if (n_output_ <= kMaxLoggedOutput)
    std::fprintf(stderr, "reward: program output: %s\n", line.substr(0, 1000).c_str());
  else if (n_output_ == kMaxLoggedOutput + 1)
    std::fprintf(stderr, "reward: %s keeps printing lines that are not answers; no more logged\n",
                 field.c_str());
}

std::string LineScorer::timeout_reason() const {
  const bool startup = !answered_ && startup_s_ > timeout_s_;
  std::string why = std::string("sent no reward ") + (answered_ ? "" : "since it started ") +
                    "within " +
                    (startup ? "spec.reward.startupTimeout (" + api::format_seconds(startup_s_)
                             : "spec.reward.timeout (" + api::format_seconds(timeout_s_)) +
                    ") while owing " + std::to_string(pending_.size()) + " (first: id \"" +
                    pending_.begin()->first + "\")";
  if (n_output_ > 0)
    why += "; the last of its " + std::to_string(n_output_) +
           " lines on stdout that were not answers: " + last_output_;
  why += answered_ ? ". Usually an answer still in the program's stdout buffer (flush after each "
                     "line: print(..., flush=True); tlt sets PYTHONUNBUFFERED=1, which only "
                     "Python reads), a request left unanswered, or a reward slower than "
                     "spec.reward.timeout"
                   : ". Usually a slow start (imports, a model loaded at start: raise "
                     "spec.reward.startupTimeout), answers still in the program's stdout buffer "
                     "(flush after each line: print(..., flush=True); tlt sets "
                     "PYTHONUNBUFFERED=1, which only Python reads), or a program that reads its "
                     "stdin to the end before it answers (answer each line as it arrives)";
  return why;
}

bool LineScorer::read_rewards() {
  char buf[65536];
  for (;;) {
    ssize_t n = read(from_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      attempt_failed(t_->why_closed());
      return false;
    }
    rbuf_.append(buf, size_t(n));
    size_t nl;
    while ((nl = rbuf_.find('\n')) != std::string::npos) {
      std::string line = rbuf_.substr(0, nl);
      rbuf_.erase(0, nl + 1);
      if (!take_line(line)) return false;
    }
    if (rbuf_.size() > kMaxLine) {
      attempt_failed("printed a line longer than 1 MiB");
      return false;
    }
  }
}

bool LineScorer::write_requests() {
  for (;;) {
    while (wbuf_.empty() && !outq_.empty()) {
      auto it = pending_.find(outq_.front());
      outq_.pop_front();
      if (it != pending_.end()) wbuf_ = it->second.line;
    }
    if (wbuf_.empty()) return true;
    ssize_t n = write(to_, wbuf_.data(), wbuf_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n < 0) {
      attempt_failed(errno == EPIPE ? t_->why_closed() + " (its input is closed)"
                                    : std::string("write: ") + strerror(errno));
      return false;
    }
    wbuf_.erase(0, size_t(n));
  }
}

void LineScorer::attempt_failed(const std::string& why) {
  const std::string field = t_->field();
  t_->close(&to_, &from_);
  wbuf_.clear(), rbuf_.clear(), outq_.clear();
  std::string last = why;
  while (restarts_ < retries_) {
    ++restarts_;
    std::fprintf(stderr, "reward: %s %s; restart %d of %d (spec.reward.retries)\n", field.c_str(),
                 why.c_str(), restarts_, retries_);
    Status s = t_->open(&to_, &from_);
    if (!s.ok()) {
      last = "could not be restarted (" + s.message() + ")";
      continue;
    }
    std::vector<std::pair<size_t, std::string>> again;
    for (const auto& [id, p] : pending_) again.emplace_back(p.slot, id);
    std::sort(again.begin(), again.end());
    for (const auto& [slot, id] : again) outq_.push_back(id);
    progress_ = now_s();
    answered_ = false;
    return;
  }
  broken_ = Status::Unavailable(field + ": the program " + last + "; gave up after " +
                                std::to_string(restarts_) + " restarts (spec.reward.retries)");
  for (const auto& [id, p] : pending_) finish(p.slot, broken_);
  pending_.clear();
}

void LineScorer::loop() {
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);  // a closed pipe is EPIPE here, not a signal
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    pollfd fds[3] = {{wake_[0], POLLIN, 0}, {from_, POLLIN, 0}, {to_, 0, 0}};
    if (!wbuf_.empty() || !outq_.empty()) fds[2].events = POLLOUT;
    int timeout_ms = -1;
    if (!pending_.empty())
      timeout_ms = std::max(0, int((progress_ + allowance() - now_s()) * 1000) + 1);
    lock.unlock();
    poll(fds, 3, timeout_ms);
    lock.lock();
    if (stop_) break;
    char drain[64];
    while (read(wake_[0], drain, sizeof drain) > 0) {
    }
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
    }
    if (!broken_.ok()) continue;
    if (from_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !read_rewards()) continue;
    if (to_ >= 0 && !write_requests()) continue;
    if (!pending_.empty() && now_s() > progress_ + allowance()) attempt_failed(timeout_reason());
  }
}

}  // namespace

StatusOr<std::unique_ptr<Scorer>> make_command_scorer(const api::RewardSpec& spec) {
  if (spec.command.empty())
    return Status::InvalidArgument("spec.reward.command: required for type command");
  auto s = std::make_unique<LineScorer>(std::make_unique<ProcessTransport>(spec.command), spec);
  TLT_RETURN_IF_ERROR(s->open());
  return std::unique_ptr<Scorer>(std::move(s));
}

StatusOr<std::unique_ptr<Scorer>> make_fifo_scorer(const api::RewardSpec& spec,
                                                   const std::string& pipe_dir) {
  auto s = std::make_unique<LineScorer>(
      std::make_unique<FifoTransport>(pipe_dir, spec.timeout.seconds), spec);
  TLT_RETURN_IF_ERROR(s->open());
  return std::unique_ptr<Scorer>(std::move(s));
}

std::vector<std::string> program_environment(bool unbuffered, bool* had_it) {
  std::vector<std::string> env;
  bool set = false;
  for (char** e = environ; *e != nullptr; ++e) {
    env.emplace_back(*e);
    set = set || std::strncmp(*e, "PYTHONUNBUFFERED=", 17) == 0;
  }
  if (unbuffered && !set) env.emplace_back("PYTHONUNBUFFERED=1");
  if (had_it) *had_it = set;
  return env;
}

}  // namespace tlt::reward
