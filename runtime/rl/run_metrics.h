// An RLJob's Prometheus metrics (runtime/metrics/metrics.h), published from the driver's
// callbacks (plan.h's RunCallbacks): per step the step, reward, tokens, drafter version and loss,
// reclaimed and idle worker-seconds, acceptance, arm choices and the rollout engines' seconds
// per phase (tlt_rollout_phase_seconds_total), and per worker its drafter
// assignment and busy share (step_report.h's busy_ratios: the device's where it measured it);
// per worker state change its state.
//
// Per-worker series are labelled with the pod names the operator gives a cluster job's pods
// (<job>-rollout-<i>, then <job>-drafter-<j>), so a local run and a cluster run read the same.
// Thread safety: as RunCallbacks (the driver's thread); RuntimeMetrics is thread-safe.
#pragma once

#include <string>

#include "runtime/metrics/metrics.h"
#include "runtime/rl/plan.h"

namespace tlt::rl {

// Worker w's pod and role, as the operator names a cluster job's pods: the rollout workers
// first (spec.roles.rollout.replicas, at least 1), then the drafter pods.
struct WorkerNames {
  std::string job;
  int rollout_replicas = 1;
  std::string role(int w) const;  // "rollout" | "drafter"
  std::string pod(int w) const;   // "<job>-rollout-0", "<job>-drafter-0"
};

// Publishes one step's report for `workers` worker slots (a worker with no interval in the
// step's timeline was absent: no series for it).
void publish_step(metrics::RuntimeMetrics& m, const WorkerNames& names, const StepReport& r,
                  int workers);

// Chains publishing to `m` (borrowed; must outlive the run; null: nothing changes) onto
// cb->step (after what it does) and cb->worker_state.
void publish_to(metrics::RuntimeMetrics* m, const WorkerNames& names, int workers,
                RunCallbacks* cb);

}  // namespace tlt::rl
