// The in-job coordinator's state machine for rollout workers within one RL step.
//
//   IDLE --begin_step--> GENERATING --worker_done--> RELEASED --(enough released)--> TRAINING
//     ^                                                  |                               |
//     +-------------------------- end_step (step boundary: preempt) ---------------------+
//
// A worker whose requests are done is RELEASED; once at least min_idle_workers are released,
// every released worker is turned to TRAINING (the drafter's spot trainer) until end_step()
// preempts them at the step boundary. A worker dedicated to the drafter (the operator's
// rebalancer assigned its pod to drafter training; set_dedicated) gets no rollout requests and
// turns TRAINING as soon as it is released, whatever min_idle_workers says. Time is passed in
// explicitly (seconds on any monotonic
// clock), so the machine is deterministic and tested without sleeping. It accounts, per step
// and in total, the worker-seconds spent idle (RELEASED) and reclaimed (TRAINING).
//
// Thread safety: none; the coordinator's owner serialises calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::cluster {

enum class WorkerState { kIdle, kGenerating, kReleased, kTraining };
const char* state_name(WorkerState s);

class Coordinator {
 public:
  Coordinator(int n_workers, int min_idle_workers);

  // Every worker IDLE -> GENERATING. FailedPrecondition if the previous step did not end.
  Status begin_step(int64_t step, double now);
  // The workers dedicated to drafter training from now on (replaces the previous set).
  // InvalidArgument for a bad index, leaving the set unchanged.
  Status set_dedicated(const std::vector<int>& workers);
  bool dedicated(int worker) const { return workers_[size_t(worker)].dedicated; }
  // GENERATING -> RELEASED, then released workers may turn TRAINING. Returns the workers that
  // start training now (possibly several, when this release reached min_idle_workers).
  // FailedPrecondition when the worker is not generating; InvalidArgument for a bad index.
  StatusOr<std::vector<int>> worker_done(int worker, double now);
  // A worker died and is back. GENERATING stays GENERATING (its requests rerun); RELEASED stays
  // RELEASED; TRAINING loses the training it had not checkpointed and rejoins through
  // RELEASED. Returns the workers that start training now.
  StatusOr<std::vector<int>> worker_restarted(int worker, double now);
  // The workers absent from the next steps (a cluster job's drafter pod that has not connected,
  // or has left): begin_step leaves them IDLE, they never train, and no time is accounted to
  // them. Replaces the previous set. InvalidArgument for a bad index, FailedPrecondition within
  // a step (use worker_left); the set is unchanged then.
  Status set_absent(const std::vector<int>& workers);
  bool absent(int worker) const { return workers_[size_t(worker)].absent; }
  // A worker left within a step and is not coming back this step (its pod went away): its
  // accounting ends at `now` and it is absent until set_absent says otherwise. FailedPrecondition
  // when it is GENERATING (its requests would be lost: restart it instead); InvalidArgument for a
  // bad index.
  Status worker_left(int worker, double now);
  // True when no worker is GENERATING: the rollout phase of the step is over.
  bool rollout_finished() const;
  // Step boundary: every worker -> IDLE; returns the TRAINING workers preempted.
  // FailedPrecondition while a worker is still GENERATING.
  StatusOr<std::vector<int>> end_step(double now);

  WorkerState state(int worker) const { return workers_[worker].state; }
  int64_t step() const { return step_; }
  double idle_seconds() const { return idle_total_; }            // worker-seconds RELEASED
  double reclaimed_seconds() const { return reclaimed_total_; }  // worker-seconds TRAINING
  // Share of the time workers were done with rollouts that went to drafter training.
  double reclaimed_share() const {
    double t = idle_total_ + reclaimed_total_;
    return t > 0 ? reclaimed_total_ / t : 0.0;
  }

 private:
  struct Worker {
    WorkerState state = WorkerState::kIdle;
    double since = 0.0;      // when it entered `state`
    bool dedicated = false;  // trains the drafter as soon as it is released
    bool absent = false;     // not part of the steps (set_absent, worker_left)
  };
  Status check_index(int worker) const;
  // RELEASED -> TRAINING for every released worker once enough are done, and at once for a
  // dedicated one.
  std::vector<int> assign_training(double now);
  void enter(int worker, WorkerState s, double now);  // closes the accounting of the old state

  const int min_idle_;
  std::vector<Worker> workers_;
  int64_t step_ = -1;
  bool in_step_ = false;
  double idle_total_ = 0.0, reclaimed_total_ = 0.0;
};

}  // namespace tlt::cluster
