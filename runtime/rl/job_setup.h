// What `tlt run` sets up for an RLJob before its runs start (runtime/rl/run.h): the plan of
// each run from the job's spec (runtime/rl/plan.h), and the scratch directory a run's weights and
// buffers live in.
//
// A job makes one or two runs, in this order: "tlt" (speculation and the adaptive drafter on)
// unless --baseline, then "baseline" under --baseline or --compare. Their directories sit under
// the job's base directory (spec.checkpoint.path, else .tlt/<name>): <base>/<label>/run for
// scratch, spec.checkpoint.path/<label> for checkpoints, <base>/<label>/trainers for a local run's
// trainer ranks (their job file, logs and rendezvous).
//
// Thread safety: plain values; ScratchDir removes its directory in its destructor.
#pragma once

#include <string>
#include <vector>

#include "api/spec.h"
#include "runtime/rl/plan.h"

namespace tlt::rl {

// The job-level choices of `tlt run` that shape its runs.
struct JobRunOptions {
  bool baseline = false;  // only the baseline run
  bool compare = false;   // the baseline run after the TLT run
  bool resume = false;    // each run continues from its last checkpoint
  // > 0: the rollout workers are remote and connect to this port (RLRunPlan::listen_port).
  int listen_port = 0;
  int weight_sync_port = 29501;  // RLRunPlan::weight_sync_port
  // > 0: the trainer ranks (TLT_TRAINER_WORLD, fixed when the pod was made) instead of
  // spec.roles.trainer.replicas.
  int trainer_world = 0;
  int trainer_group_port = 29502;  // RLRunPlan::trainer_group_port
  std::string trainer_group_host;  // RLRunPlan::trainer_group_host
};

struct JobRun {
  std::string label;  // "tlt" or "baseline"
  RLRunPlan plan;     // run_dir: <base>/<label>/run (ScratchDir may move it to memory)
};

// The spec as a run's plan (`baseline`: speculation and drafter training off). The worker
// executable is this process's, the warm-start cache data::cache_root().
RLRunPlan plan_from_spec(const api::RLJob& job, bool baseline);

// The job's base directory: spec.checkpoint.path, else .tlt/<name>.
std::string job_base_dir(const api::RLJob& job);

// The runs of the job, in the order they run.
std::vector<JobRun> job_runs(const api::RLJob& job, const JobRunOptions& options);

// Scratch that a run writes and reads back within the run: the policy each step pushes to the
// rollout workers (a real model's is hundreds of MB a step), drafter versions, hidden-state
// buffers. It goes under /dev/shm when that has 4 GiB free (a pod's default 64 MB does not; then
// `fallback`, the job's directory), in a directory named after this process, removed when the
// ScratchDir is destroyed or, after a crash, by the next run that finds its process gone.
// TLT_RUN_SCRATCH=job keeps it in `fallback` (kept after the run, as a record of the last policy
// the workers loaded).
class ScratchDir {
 public:
  ScratchDir(const std::string& fallback, const std::string& label);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  bool in_memory() const { return owned_; }  // under /dev/shm, removed on destruction

 private:
  std::string path_;
  bool owned_ = false;
};

}  // namespace tlt::rl
