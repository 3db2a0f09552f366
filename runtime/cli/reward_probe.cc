#include "runtime/cli/reward_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "api/validate.h"
#include "runtime/clock.h"
#include "runtime/dataset/dataset.h"
#include "runtime/reward/scorer.h"
#include "runtime/reward/sources.h"
#include "runtime/rl/dataset_task.h"
#include "runtime/rl/scoring.h"
#include "runtime/rl/tasks.h"

namespace tlt::cli {
namespace {
using json = nlohmann::json;

constexpr const char* kField = "spec.reward.command";
constexpr const char* kProbeId = "tlt-validate-1";
constexpr double kIdleS = 1.0;      // this long in read(0) without CPU while the answer is owed
constexpr double kBufferedS = 1.0;  // an answer this soon after the input closed was held back
constexpr size_t kStderrKept = 2048;

using runtime::now_s;

// What the processes of group `pgid` (a wrapper's children included) are doing: the CPU ticks
// they used so far, and whether one of them waits in read() on its stdin (the request pipe).
struct GroupState {
  uint64_t ticks = 0;
  bool reading_stdin = false;
};

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Whether a thread of process `pid` is in read(0, ...) (/proc/PID/task/TID/syscall: the call's
// number and its arguments in hex; readable for our own descendants).
bool reads_stdin(const std::string& pid) {
  DIR* tasks = ::opendir(("/proc/" + pid + "/task").c_str());
  if (!tasks) return false;
  bool reading = false;
  while (dirent* t = ::readdir(tasks)) {
    if (t->d_name[0] < '0' || t->d_name[0] > '9') continue;
    std::istringstream call(read_small_file("/proc/" + pid + "/task/" + t->d_name + "/syscall"));
    long number = -1;
    std::string fd;
    if (call >> number >> fd && number == SYS_read && fd == "0x0") reading = true;
  }
  ::closedir(tasks);
  return reading;
}

GroupState group_state(pid_t pgid) {
  GroupState g;
  DIR* proc = ::opendir("/proc");
  if (!proc) return g;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string stat = read_small_file(std::string("/proc/") + e->d_name + "/stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 > stat.size()) continue;
    // After the command: state, ppid, pgrp, then 8 fields (sid to cmajflt), then utime and
    // stime.
    std::istringstream rest(stat.substr(close + 2));
    std::string state, skip;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp != pgid) continue;
    for (int k = 0; k < 8; ++k) rest >> skip;
    uint64_t utime = 0, stime = 0;
    rest >> utime >> stime;
    g.ticks += utime + stime;
    g.reading_stdin = g.reading_stdin || reads_stdin(e->d_name);
  }
  ::closedir(proc);
  return g;
}

// One run of the program on one request.
struct Trial {
  std::string start_error;     // set when it could not be started
  std::optional<json> answer;  // the line that answered the probe's id (or another id)
  double answer_s = -1;        // when it came, since the start
  double eof_s = -1;           // when its input was closed (-1: it answered before)
  int64_t n_output = 0;        // stdout lines that were not answers
  std::string first_output;    // the first of them, cut to 200 bytes
  bool exited = false;         // its stdout ended without an answer
  int status = -1;             // waitpid's status once it exited
  bool timed_out = false;      // no answer within the allowance
  std::string stderr_tail;     // the last kStderrKept bytes of its stderr
};

// The program as a child in a process group of its own, with pipes to its stdin, stdout and
// stderr; killed (the whole group) and reaped on destruction.
class Child {
 public:
  ~Child() {
    for (int* fd : {&in_, &out_, &err_})
      if (*fd >= 0) ::close(*fd);
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    if (!reaped_)
      while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
      }
  }
  Status start(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    std::vector<std::string> a = argv, e = env;
    std::vector<char*> args, envp;
    for (std::string& s : a) args.push_back(s.data());
    for (std::string& s : e) envp.push_back(s.data());
    args.push_back(nullptr), envp.push_back(nullptr);
    int rc = posix_spawnp(&pid_, args[0], &fa, &attr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]), ::close(out[1]), ::close(err[1]);
    in_ = in[1], out_ = out[0], err_ = err[0];
    if (rc != 0) {
      pid_ = -1;
      return Status::Unavailable("cannot start " + argv[0] + ": " + std::strerror(rc));
    }
    return Status::Ok();
  }
  pid_t pid() const { return pid_; }
  int in() const { return in_; }
  int out() const { return out_; }
  int err() const { return err_; }
  void close_input() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }
  // Waits up to `seconds` for the program to exit; its status, or -1.
  int wait_exit(double seconds) {
    for (double end = now_s() + seconds; !reaped_ && now_s() < end;) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_)
        reaped_ = true;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return reaped_ ? status_ : -1;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

// Reads what is there on `fd` into `buf`; false at end of file.
bool drain(int fd, std::string* buf) {
  char chunk[4096];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buf->append(chunk, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return !(n == 0);
  }
}

// Takes a stdout line: the answer (a JSON object with an "id"), or output the job would log.
void take_line(const std::string& line, double t, Trial* trial) {
  json j = json::parse(line, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("id")) {
    trial->answer = j;
    trial->answer_s = t;
    return;
  }
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  if (trial->n_output++ == 0) trial->first_output = line.substr(0, 200);
}

Trial run_trial(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                const std::string& request, double allowance_s) {
  Trial trial;
  Child child;
  Status started = child.start(argv, env);
  if (!started.ok()) {
    trial.start_error = started.message();
    return trial;
  }
  const double start = now_s();
  std::string to_send = request + "\n", out, err;
  ::fcntl(child.in(), F_SETFL, O_NONBLOCK);
  ::fcntl(child.out(), F_SETFL, O_NONBLOCK);
  ::fcntl(child.err(), F_SETFL, O_NONBLOCK);
  // A program that exits at once must not end this process with SIGPIPE (`tlt validate` and
  // `tlt score` write to no other pipe).
  ::signal(SIGPIPE, SIG_IGN);
  uint64_t cpu = group_state(child.pid()).ticks;
  double cpu_changed = start;
  bool out_open = true, err_open = true;
  while (!trial.answer) {
    double t = now_s() - start;
    if (t > allowance_s) {
      trial.timed_out = true;
      break;
    }
    if (!to_send.empty() && child.in() >= 0) {
      ssize_t n = ::write(child.in(), to_send.data(), to_send.size());
      if (n > 0) to_send.erase(0, size_t(n));
      if (n < 0 && errno == EPIPE) child.close_input();
    }
    pollfd fds[2] = {{out_open ? child.out() : -1, POLLIN, 0},
                     {err_open ? child.err() : -1, POLLIN, 0}};
    ::poll(fds, 2, 100);
    if (err_open) err_open = drain(child.err(), &err);
    if (err.size() > kStderrKept) err.erase(0, err.size() - kStderrKept);
    if (out_open) out_open = drain(child.out(), &out);
    for (size_t nl; !trial.answer && (nl = out.find('\n')) != std::string::npos;) {
      take_line(out.substr(0, nl), now_s() - start, &trial);
      out.erase(0, nl + 1);
    }
    if (trial.answer) break;
    if (!out_open) {
      if (!out.empty()) take_line(out, now_s() - start, &trial);
      trial.exited = !trial.answer;
      break;
    }
    // Idle in read() on its stdin while it owes the answer: it waits for more input with its
    // answer in a buffer. Closing its input tells (a program waiting on anything else, a
    // network or a sleep, is left to answer within the allowance).
    if (trial.eof_s < 0 && to_send.empty()) {
      GroupState g = group_state(child.pid());
      if (g.ticks != cpu || !g.reading_stdin) cpu = g.ticks, cpu_changed = now_s();
      if (now_s() - cpu_changed >= kIdleS) {
        child.close_input();
        trial.eof_s = now_s() - start;
      }
    }
  }
  child.close_input();
  if (trial.exited) trial.status = child.wait_exit(1.0);
  drain(child.err(), &err);
  trial.stderr_tail = err.size() > kStderrKept ? err.substr(err.size() - kStderrKept) : err;
  return trial;
}

// The made-up request: the dataset's first row (or the generated task's first problem), answered
// with its own answer (or worked solution); *what says which it is.
reward::ScoreRequest made_up_request(const api::RLJob& job, std::string* what) {
  reward::ScoreRequest r;
  r.id = kProbeId;
  r.prompt = "What is 2 + 3?", r.reference_json = "\"5\"", r.response = "5";
  *what = "\"What is 2 + 3?\", answered \"5\"";
  const api::DatasetSpec& ds = job.spec.task.dataset;
  if (ds.path.empty()) {
    StatusOr<std::unique_ptr<rl::Task>> task = rl::make_task(
        job.spec.task.effective_name(), uint64_t(job.spec.task.seed),
        rl::TaskOptions{job.spec.task.free_text_answer(!job.spec.model.path.empty())});
    if (!task.ok()) return r;
    rl::Problem p = (*task)->problem(0, false);
    *what = "the task's first problem, answered with its worked solution";
    return rl::score_request(p, kProbeId, p.solution);
  }
  dataset::OpenOptions o;
  o.max_rows = 1;
  StatusOr<std::unique_ptr<dataset::Dataset>> d = dataset::Dataset::open(ds.path, o);
  if (!d.ok() || (*d)->rows() == 0) return r;
  StatusOr<json> row = (*d)->row(0);
  if (!row.ok()) return r;
  const json* answer = dataset::at_path(*row, ds.answer_field);
  if (!answer) return r;
  StatusOr<reward::ScoreRequest> made = row_request(
      job, *row, kProbeId, answer->is_string() ? answer->get<std::string>() : answer->dump());
  if (!made.ok()) return r;
  *what = (*d)->where(0) + ", answered with its own answer";
  return *made;
}

std::string last_lines(const std::string& text, int n) {
  size_t at = text.size();
  while (at > 0 && (text[at - 1] == '\n' || text[at - 1] == '\r')) --at;
  size_t end = at;
  for (int k = 0; k < n && at > 0; ++k) {
    size_t nl = text.rfind('\n', at - 1);
    at = nl == std::string::npos ? 0 : nl;
  }
  std::string s = text.substr(at, end - at);
  return s.empty() || s[0] != '\n' ? s : s.substr(1);
}

void add(api::FieldErrors* to, std::string message) {
  to->push_back({kField, std::move(message)});
}

// Why a trial got no answer.
std::string no_answer(const Trial& t, double allowance_s) {
  std::string why;
  if (t.timed_out) {
    why = "sent no reward for the made-up request within " + api::format_seconds(allowance_s) +
          " (spec.reward.startupTimeout, or timeout when longer): a slow start (raise "
          "startupTimeout) or a program that does not read one JSON request per line";
  } else {
    why = "ended before it answered the made-up request";
    if (t.status >= 0 && WIFEXITED(t.status))
      why += " (exit status " + std::to_string(WEXITSTATUS(t.status)) + ")";
    else if (t.status >= 0 && WIFSIGNALED(t.status))
      why += " (killed by signal " + std::to_string(WTERMSIG(t.status)) + ")";
  }
  std::string tail = last_lines(t.stderr_tail, 3);
  return tail.empty() ? why : why + "; its stderr ends: " + tail;
}

// The answer of a trial that gave one: its id, its reward (check_reward), and the note.
void judge_answer(const Trial& t, const std::string& what, Findings* f) {
  const json& a = *t.answer;
  if (!a["id"].is_string() || a["id"].get<std::string>() != kProbeId) {
    add(&f->errors, "answered id " + a["id"].dump() + " to a request of id \"" + kProbeId +
                        "\": echo each request's \"id\" as it came");
    return;
  }
  if (!a.contains("reward")) {
    add(&f->errors, "answered " + a.dump().substr(0, 200) +
                        " without a \"reward\"; answer {\"id\": ..., \"reward\": number}");
    return;
  }
  StatusOr<double> reward = reward::check_reward(a["reward"], kField, kProbeId);
  if (!reward.ok()) {  // its message starts with the field, which the finding carries
    add(&f->errors, reward.status().message().substr(std::string(kField).size() + 2));
    return;
  }
  add(&f->notes, "answered a made-up request (" + what + ") in " +
                     api::format_seconds(std::round(t.answer_s * 100) / 100) + " with reward " +
                     api::format_number(*reward));
}

}  // namespace

StatusOr<reward::ScoreRequest> row_request(const api::RLJob& job, const json& row, std::string id,
                                           std::string response) {
  const api::DatasetSpec& ds = job.spec.task.dataset;
  auto field = [&](const char* key, const std::string& dotted) -> const json* {
    auto it = row.find(key);
    if (it != row.end()) return &*it;
    return ds.path.empty() ? nullptr : dataset::at_path(row, dotted);
  };
  const json* prompt = field("prompt", ds.prompt_field);
  const json* answer = field("answer", ds.answer_field);
  if (!answer)
    return Status::InvalidArgument(
        "the row has no \"answer\"" +
        (ds.path.empty() || ds.answer_field == "answer" ? "" : " (nor " + ds.answer_field + ")"));
  reward::ScoreRequest r;
  r.id = std::move(id), r.response = std::move(response);
  if (prompt && prompt->is_string()) {
    r.prompt = prompt->get<std::string>();
  } else if (prompt && prompt->is_array()) {  // chat messages: their contents, as a run sends
    for (const json& m : *prompt)
      if (m.is_object() && m.value("content", json()).is_string())
        r.prompt += (r.prompt.empty() ? "" : "\n") + m["content"].get<std::string>();
  } else if (prompt) {
    return Status::InvalidArgument("its \"prompt\" is a " + std::string(prompt->type_name()) +
                                   "; a prompt is a string or a list of chat messages");
  }
  r.reference_json = answer->dump(-1, ' ', false, json::error_handler_t::replace);
  r.fields_json = rl::reward_fields_json(job.spec.reward.row_fields, row);
  return r;
}

Findings probe_reward(const api::RLJob& job) {
  Findings f;
  const api::RewardSpec& spec = job.spec.reward;
  if (spec.command.empty()) {
    add(&f.notes, "the program runs in spec.reward.container's image; not started here");
    return f;
  }
  std::string what;
  reward::ScoreRequest request = made_up_request(job, &what);
  StatusOr<json> json_request = reward::request_json(request);
  if (!json_request.ok()) return f;  // the dataset's own checks name the answer
  // Text that is not UTF-8 goes as U+FFFD, as the job's runner sends it.
  const std::string wire = json_request->dump(-1, ' ', false, json::error_handler_t::replace);
  const double allowance = std::max(spec.timeout.seconds, spec.startup_timeout.seconds);
  bool had_unbuffered = false;
  Trial t =
      run_trial(spec.command, reward::program_environment(false, &had_unbuffered), wire, allowance);
  if (!t.start_error.empty()) {
    add(&f.errors, t.start_error +
                       " (the command is run without a shell, from the working "
                       "directory; name an executable on PATH or a path to one)");
    return f;
  }
  bool buffered = t.answer && t.eof_s >= 0 && t.answer_s - t.eof_s < kBufferedS;
  if (buffered && !had_unbuffered) {
    Trial again = run_trial(spec.command, reward::program_environment(), wire, allowance);
    if (again.answer && again.eof_s < 0) {
      add(&f.warnings,
          "answered only when its input closed: it holds its output in a buffer. It runs "
          "because tlt starts it with PYTHONUNBUFFERED=1, which Python obeys; flush after each "
          "answer (print(..., flush=True)) for any other runtime");
      t = again, buffered = false;
    }
  }
  if (buffered) {
    add(&f.errors,
        "answered only when its input closed: it holds its output in a buffer, so a job would "
        "wait spec.reward.timeout (" +
            api::format_seconds(spec.timeout.seconds) +
            ") for each reward and restart the program; flush stdout after each answer line");
    return f;
  }
  if (t.n_output > 0)
    add(&f.warnings, "printed " + std::to_string(t.n_output) +
                         (t.n_output == 1 ? " line on stdout that is not an answer"
                                          : " lines on stdout that are not answers") +
                         " (first: \"" + t.first_output +
                         "\"): a job logs them and goes on, but stdout is for answers; print "
                         "the rest to stderr");
  if (!t.answer) {
    add(&f.errors, no_answer(t, allowance));
    return f;
  }
  judge_answer(t, what, &f);
  return f;
}

}  // namespace tlt::cli
