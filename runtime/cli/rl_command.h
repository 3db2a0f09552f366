// `tlt run` for an RLJob: GRPO with the adaptive drafter on one machine (runtime/rl/run.h),
// a live progress line, /metrics, checkpoints, and a report directory (JSON per step, a
// per-worker timeline and step-time/reward pictures; TLT vs baseline with --compare).
#pragma once

#include <iosfwd>
#include <string>

#include "api/spec.h"

namespace tlt::cli {

struct RLRunFlags {
  bool baseline = false;   // speculation and drafter training off
  bool compare = false;    // run TLT, then the baseline, and report both
  bool resume = false;     // continue from the job's last checkpoint
  std::string report_dir;  // default: <checkpoint.path or .tlt/NAME>/report
  // When set, the run stands in for the job's pods in this namespace of a cluster where the
  // operator created them (pods <job>-rollout-<i>, <job>-trainer-0): at each step boundary
  // worker i takes the rebalancer's assignment of pod <job>-rollout-<i> (drafter training or
  // rollout), and after each step the progress goes to <job>-trainer-0's tlt.dev/progress
  // annotation, from which the operator fills the job's status. An unreachable apiserver is a
  // warning (assignments stay as they were), never a failed run.
  std::string attach_namespace;
  std::string kubeconfig;  // "": $KUBECONFIG, else the pod's service account
  // > 0: the rollout workers are remote (a cluster job's pods, `tlt run-role`) and connect to
  // this port, instead of being child processes.
  int listen_port = 0;
  int weight_sync_port = 29501;  // with listen_port: the weight-sync group's port
  // With listen_port: the trainer ranks (TLT_TRAINER_WORLD; 0: spec.roles.trainer.replicas) and
  // the port this trainer pod (rank 0) hosts their group's store on (api/trainer_group.h).
  int trainer_world = 0;
  int trainer_group_port = 29502;
  std::string trainer_group_host;  // RLRunPlan::trainer_group_host
};

// Returns the process exit code: 0 (also after SIGTERM, once checkpointed), 1 on failure.
int run_rl_job(const api::RLJob& job, const RLRunFlags& flags, std::ostream& out,
               std::ostream& err);

// `tlt rl-worker`: a rollout worker process talking to its driver over stdin/stdout.
int rl_worker_command();

// A cluster job's rollout pod: connects to the trainer pod at host:port as worker `index`
// (retrying for up to 10 minutes while the trainer starts) and serves it until it says exit or
// hangs up; the files it is sent live under work_dir. Returns the process exit code.
int rl_remote_worker(const std::string& host, int port, int index, const std::string& work_dir,
                     std::ostream& out, std::ostream& err);

}  // namespace tlt::cli
