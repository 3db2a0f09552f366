#include "runtime/process/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace tlt::process {
namespace {

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

StatusOr<pid_t> spawn(const ChildOptions& o) {
  // Everything the child needs is made before fork: after it, only async-signal-safe calls.
  std::vector<std::string> argv_strings = o.argv, env_strings = o.env;
  std::vector<char*> argv = pointers(argv_strings), envp = pointers(env_strings);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status::Unavailable("cannot fork " + o.exe);
  if (pid == 0) {
    if (o.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);  // the parent died before prctl
    }
    if (o.stdin_fd >= 0) dup2(o.stdin_fd, STDIN_FILENO);
    if (o.stdout_fd >= 0) {
      dup2(o.stdout_fd, STDOUT_FILENO);
    } else if (!o.stdout_path.empty()) {
      int fd = open(o.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) dup2(fd, STDOUT_FILENO);
    }
    execve(o.exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

bool stop_after_grace(pid_t pid, int grace_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (;;) {
    pid_t got = waitpid(pid, nullptr, WNOHANG);
    if (got == pid || (got < 0 && errno != EINTR)) return true;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  return false;
}

}  // namespace tlt::process
