// The worker processes of a local data-parallel TST run: `tlt run` is rank 0 and starts ranks
// 1..R-1 as `tlt run-role` processes of the running binary (which must therefore be `tlt`), with
// the TLT_* environment that run-role reads (runtime/cli/commands.h): TLT_JOB_FILE,
// TLT_ROLE (worker), TLT_INDEX, TLT_RENDEZVOUS_ADDRESS=127.0.0.1 (Gloo binds loopback),
// TLT_RENDEZVOUS_FILE (the group's file store: its store listens on no port), TLT_TST_RUNS,
// TLT_RESUME and TLT_THREADS (and OMP_NUM_THREADS, BLIS_NUM_THREADS with the same count). Every
// other variable of this process is passed on, except TLT_* ones.
//
// Each worker's stdout goes to <dir>/<role>-<r>.log (worker-<r>.log for TST); its stderr is this
// process's. Workers die with this process (PR_SET_PDEATHSIG), and the destructor ends the ones
// still running.
//
// Thread safety: one thread uses a LocalWorkers.
#pragma once

#include <sys/types.h>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::tst {

// What every worker process is told besides its rank and the rendezvous.
struct LocalWorkerEnv {
  std::string runs = "tst";  // TLT_TST_RUNS: "tst", "baseline" or "tst,baseline"
  bool resume = false;       // TLT_RESUME=1
  int threads = 1;           // TLT_THREADS: compute threads of each worker
  // TLT_ROLE, and the name of each process in logs and errors ("data-parallel <role> <r>",
  // <dir>/<role>-<r>.log): an RLJob's trainer ranks are "trainer".
  std::string role = "worker";
};

class LocalWorkers {
 public:
  LocalWorkers() = default;
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;
  ~LocalWorkers() { stop(); }

  // Starts ranks 1..world-1 of the job in job_file (JSON or YAML), meeting rank 0 at
  // 127.0.0.1:port, with logs in dir (which must exist). Unavailable when this binary cannot be
  // found or a fork fails (the workers started so far keep running until stop()).
  Status start(const std::string& job_file, const std::string& dir, int world,
               const std::string& rendezvous_file, const LocalWorkerEnv& env);

  // Waits up to timeout_s for every worker to exit; returns "" when all exited 0, else one line
  // (ending in "\n") per worker that failed or is still running (those are then ended).
  std::string wait(int timeout_s);

  // Ends the workers still running: SIGTERM, then SIGKILL after 5 s.
  void stop();

  // Without waiting: one line (ending in "\n") per worker that has exited since the last call
  // (reaped here), "" when none.
  std::string exited();

 private:
  Status spawn(const std::string& exe, std::vector<std::string>& env, const std::string& log);

  std::vector<pid_t> pids_;  // rank r at r - 1; -1 once reaped
  std::string role_ = "worker";
};

}  // namespace tlt::tst
