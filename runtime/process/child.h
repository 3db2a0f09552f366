// Child processes of the runtime: a program started with fork and exec (a local RL run's
// `tlt rl-worker`s, a local data-parallel TST run's `tlt run-role`s), and one stopped by asking
// first and killing after a grace period.
//
// Errors: spawn returns Unavailable when the process cannot be forked; a child whose exec fails
// exits with status 127 (its parent sees it as a worker that died).
// Ownership: the caller owns the pid (reap it, e.g. with stop_after_grace) and the descriptors
// it passed; spawn closes none of them in the parent.
// Thread safety: functions; spawn's child calls only async-signal-safe functions before exec.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::process {

struct ChildOptions {
  std::string exe;                // the program's path
  std::vector<std::string> argv;  // argv[0] first
  std::vector<std::string> env;   // its whole environment, "NAME=value" each
  int stdin_fd = -1;              // made its standard input (-1: this process's)
  int stdout_fd = -1;             // made its standard output (-1: this process's, or stdout_path)
  std::string stdout_path;        // with stdout_fd -1: a file created (truncated) for its output
  bool die_with_parent = false;   // killed (SIGKILL) when this process dies
};

// Forks and execs o.exe; returns the child's pid.
StatusOr<pid_t> spawn(const ChildOptions& o);

// Waits up to grace_ms for `pid` (a child asked to stop: its input closed, an exit message,
// SIGTERM) to exit, then kills it (SIGKILL); reaps it either way. Returns whether it exited
// within the grace period. A pid that is not (or no longer) a child returns true at once.
bool stop_after_grace(pid_t pid, int grace_ms);

}  // namespace tlt::process
