#include "runtime/tst/local_workers.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "runtime/process/child.h"

extern char** environ;

namespace tlt::tst {
namespace {

// How long a worker sent SIGTERM may take to exit before it is killed.
constexpr int kStopGraceMs = 5000;

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

// This process's environment without the variables a worker is given anew.
std::vector<std::string> inherited_env() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("TLT_", 0) != 0 && kv.rfind("OMP_NUM_THREADS=", 0) != 0 &&
        kv.rfind("BLIS_NUM_THREADS=", 0) != 0)
      env.push_back(kv);
  }
  return env;
}

}  // namespace

Status LocalWorkers::start(const std::string& job_file, const std::string& dir, int world,
                           const std::string& rendezvous_file, const LocalWorkerEnv& worker) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::Unavailable("cannot find this binary: " + ec.message());
  std::string threads = std::to_string(worker.threads);
  role_ = worker.role;
  for (int r = 1; r < world; ++r) {
    std::vector<std::string> env = inherited_env();
    for (std::string kv :
         {"TLT_JOB_FILE=" + job_file, "TLT_ROLE=" + worker.role, "TLT_INDEX=" + std::to_string(r),
          std::string("TLT_RENDEZVOUS_ADDRESS=127.0.0.1"), "TLT_RENDEZVOUS_FILE=" + rendezvous_file,
          "TLT_TST_RUNS=" + worker.runs, std::string("TLT_RESUME=") + (worker.resume ? "1" : "0"),
          "TLT_THREADS=" + threads, "OMP_NUM_THREADS=" + threads, "BLIS_NUM_THREADS=" + threads})
      env.push_back(kv);
    std::string log = (fs::path(dir) / (worker.role + "-" + std::to_string(r) + ".log")).string();
    TLT_RETURN_IF_ERROR(spawn(self.string(), env, log));
  }
  return Status::Ok();
}

std::string LocalWorkers::wait(int timeout_s) {
  std::string failed;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (pids_[i] <= 0) continue;
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pids_[i], &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string who = "data-parallel " + role_ + " " + std::to_string(i + 1) + " (pid " +
                      std::to_string(pids_[i]) + ") ";
    if (got == 0) {
      failed += who + "did not finish in " + std::to_string(timeout_s) + " s\n";
      continue;
    }
    pids_[i] = -1;
    if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failed += who + (got < 0 ? "was lost" : exit_text(status)) + "\n";
  }
  stop();
  return failed;
}

std::string LocalWorkers::exited() {
  std::string lines;
  for (size_t i = 0; i < pids_.size(); ++i) {
    int status = 0;
    if (pids_[i] <= 0 || waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
    lines += "data-parallel " + role_ + " " + std::to_string(i + 1) + " (pid " +
             std::to_string(pids_[i]) + ") " + exit_text(status) + "\n";
    pids_[i] = -1;
  }
  return lines;
}

void LocalWorkers::stop() {
  for (pid_t p : pids_)
    if (p > 0) kill(p, SIGTERM);
  for (pid_t& p : pids_) {
    if (p > 0) process::stop_after_grace(p, kStopGraceMs);
    p = -1;
  }
}

Status LocalWorkers::spawn(const std::string& exe, std::vector<std::string>& env,
                           const std::string& log) {
  process::ChildOptions child;
  child.exe = exe;
  child.argv = {"tlt", "run-role"};
  child.env = env;
  child.stdout_path = log;
  child.die_with_parent = true;
  StatusOr<pid_t> pid = process::spawn(child);
  if (!pid.ok()) return Status::Unavailable("cannot fork a data-parallel worker");
  pids_.push_back(*pid);
  return Status::Ok();
}

}  // namespace tlt::tst
