// The RLJob driver on one machine: the in-job coordinator and the trainer role in this process,
// N rollout workers as child processes (`tlt rl-worker`, runtime/rl/worker.h).
//
// One RL step:
//   1. the step's prompts (groups of G) are split over the workers with the current policy and
//      drafter versions; every worker is GENERATING (runtime/cluster/coordinator.h);
//   2. a worker whose requests are done is RELEASED; once minIdleWorkers are released they are
//      TRAINING: each trains its drafter copy on the hidden-state buffers of the last bufferSteps
//      steps (the current step's included as soon as a worker has written it);
//   3. when no worker generates any more, the trainers are stopped at their next optimizer-step
//      boundary, their drafters are averaged (weighted by steps) into a new drafter version that
//      every worker loads before the next step's speculation;
//   4. the trainer computes rewards and group advantages and takes the GRPO update, then writes
//      the next policy version, which workers load before generating again.
// With `baseline` set, speculation and drafter training are off and nothing else changes: same
// prompts, same seeds, same update.
//
// Rooms: run.cc keeps the step loop (run_step: the rollout phase, the drafters merged, the
// policy update). The plan, the result and the callbacks are runtime/rl/plan.h's; steps 1-3,
// runtime/rl/rollout_phase.h's; the models the run starts from, runtime/rl/policy_setup.h's; the
// workers' setup message, runtime/rl/worker_options.h's; the run directory's files,
// runtime/rl/run_dir.h's; the checkpoints, runtime/rl/checkpoint.h's; a step's report,
// runtime/rl/step_report.h's; the worker processes and pods, runtime/rl/worker_pool.h's; the
// weight-sync group's generations and each step's publish, runtime/rl/weight_publisher.h's; what
// every message between the driver and a worker may contain, runtime/rl/messages.h's; the job's
// metrics, run_metrics.h's; the plans of a job's runs from its spec, runtime/rl/job_setup.h's.
//
// The policy is a preset (the ASCII codec of runtime/rl/text.h, warm-started on the task's worked
// solutions) or spec.model.path's model (its own tokenizer and chat template, no warm start by
// default: RLRunPlan::warm_start_steps()). Either way the workers build the architecture from
// their setup message and load the weights the trainer writes, and checkpoints carry the model
// card (model.json beside step-N/) so that `tlt export` reads them back.
//
// Sampling is seeded per request from (seed, step, index), and the engine's outputs do not
// depend on the drafting arm, so a step is reproducible whichever worker generates a request,
// after a worker restart, and after --resume.
//
// Workers the cluster's rebalancer assigned to drafter training (RunCallbacks::
// drafter_assignments, read at each step boundary) take no requests that step and train the
// drafter throughout its rollout phase; the requests go to the other workers.
//
// A cluster job's drafter pods (remote workers, listen_port > 0) come and go: the operator's
// rebalancer scales spec.roles.drafter.replicas. Each drafter pod has a slot (worker index
// rollout workers + pod index, up to drafter_role_workers slots); a slot without a connection is
// absent from a step (no messages, no accounting). At the start the driver waits up to
// drafter_start_grace_s for the drafter_pods_at_start pods the spec has; after that it never
// waits for one: a drafter pod that connects is taken at the next step boundary, and one that
// hangs up (its pod deleted, or failed) is dropped at once, the step going on without it (the
// training it had not handed back is lost; the other trainers' is merged as usual).
//
// Faults: a worker that dies, or sends a message the driver refuses (runtime/rl/messages.h), is
// restarted and its unfinished requests rerun; one that fails more than
// RolloutPhase::kMaxRestartsPerStep times in a step ends the run with an error naming it. SIGTERM
// (the `stop` flag) ends the run after checkpointing the last completed step. A checkpoint that
// fails its checks is refused (Corruption / InvalidArgument naming the file).
//
// Thread safety: run_rl is called from one thread; `stop` may be set from a signal handler.
#pragma once

#include <atomic>

#include "api/status.h"
#include "runtime/rl/plan.h"

namespace tlt::rl {

StatusOr<RLRunResult> run_rl(const RLRunPlan& plan, const RunCallbacks& callbacks,
                             const std::atomic<bool>* stop);

}  // namespace tlt::rl
