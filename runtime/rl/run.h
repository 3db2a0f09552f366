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
// policy update). Steps 1-3 are runtime/rl/rollout_phase.h's; the models the run starts from,
// runtime/rl/policy_setup.h's; the workers' setup message, runtime/rl/worker_options.h's; the
// checkpoints, runtime/rl/checkpoint.h's; a step's report, runtime/rl/step_report.h's; the worker
// processes and pods, runtime/rl/worker_pool.h's; the weight-sync group's generations and each
// step's publish, runtime/rl/weight_publisher.h's; what every message between the driver and a
// worker may contain, runtime/rl/messages.h's; the job's metrics, run_metrics.h's; the plans of a
// job's runs from its spec, runtime/rl/job_setup.h's.
//
// The policy is a preset (the ASCII codec of runtime/rl/text.h, warm-started on the task's worked
// solutions) or spec.model.path's model (its own tokenizer and chat template, no warm start by
// default: RLRunPlan::model_path). Either way the workers build the architecture from their setup
// message and load the weights the trainer writes, and checkpoints carry the model card
// (model.json beside step-N/) so that `tlt export` reads them back.
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
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/spec.h"
#include "api/status.h"
#include "runtime/rl/paired.h"
#include "runtime/rl/step_report.h"
#include "runtime/rl/worker_options.h"

namespace tlt::rl {

struct RLRunPlan {
  std::string job = "rljob";
  std::string preset = "micro";
  // spec.model.path / format (runtime/model/model_source.h): when set, the policy and the
  // reference start from that model, which reads through its own tokenizer and chat template
  // (runtime/rl/model_codec.h); `preset` is ignored. Workers get its architecture in their setup
  // message and its weights from the trainer, as for a preset.
  std::string model_path, model_format = "auto";
  // spec.model.dtype: the policy update's matrix products (model::use_bfloat16): auto, float32
  // or bfloat16.
  std::string model_dtype = "auto";
  std::string task = "arithmetic-cot";
  uint64_t task_seed = 1;
  bool task_free_text = false;  // TaskOptions::free_text (spec.task.answer)
  api::DatasetSpec dataset;     // spec.task.dataset: prompts from files when its path is set
  api::RewardSpec reward;       // spec.reward
  int64_t held_out = 64;
  int64_t steps = 4, prompts_per_step = 8, group_size = 4;
  int32_t max_response_tokens = 96;
  double temperature = 1.0, top_p = 1.0;
  double learning_rate = 1e-4, kl_coef = 0.0, clip = 0.2;
  std::string loss_aggregation = "token";  // spec.algorithm.lossAggregation: token | sequence
  uint64_t seed = 0;
  int64_t warm_start_steps = 300;  // 0 with model_path: the policy is the model as loaded
  double warm_start_learning_rate = 2e-3;
  int64_t warm_start_max_prompt_chars = 64;  // WarmStartOptions::max_prompt_chars
  double warm_start_unmarked_answers = 0.0;  // WarmStartOptions::unmarked_answers
  int workers = 2;                           // all worker processes, the drafter pods' included
  // The last this-many workers are dedicated drafter trainers (spec.roles.drafter.replicas;
  // remote workers: the slots for drafter pods, spec.roles.drafter.maxReplicas): they never
  // generate and train the drafter through every rollout phase.
  int drafter_role_workers = 0;
  bool baseline = false;  // speculation and drafter training off
  bool speculative = true;
  // The workers' engines and drafter trainers (spec.speculative, spec.drafter): every worker's
  // setup message carries them (runtime/rl/worker_options.h).
  WorkerSpec worker;
  // The workers' bandits count each other's steps of the previous step (rollout::ArmSelector's
  // pooling; spec.speculative.selector.pooled).
  bool selector_pooled = true;
  // Drafter warm start (rl::drafter_warm_start) before step 1, cached next to the policy's;
  // 0: the drafter starts untrained. Skipped with `baseline`.
  int64_t drafter_warm_start_steps = 200;
  int64_t drafter_warm_start_prompts = 64;  // a real model's: problems answered for its data
  double drafter_warm_start_learning_rate = 1e-3;
  int64_t drafter_warm_start_batch = 16;
  int32_t drafter_warm_start_max_tokens = 256;  // solutions cut to this (and max_response_tokens)
  bool drafter_training = true;
  int min_idle_workers = 1;
  int buffer_steps = 2;
  // Drafter frozen after this many steps of training (-1: never): the benchmark's control.
  int64_t freeze_drafter_after = -1;
  std::string run_dir;         // scratch: weights pushed to workers, buffers (required)
  std::string checkpoint_dir;  // empty: no checkpoints
  int64_t checkpoint_every = 0;
  int64_t checkpoint_keep = 2;
  bool resume = false;
  std::string worker_exe;  // the `tlt` binary to run as `tlt rl-worker`
  // > 0: the workers are remote (a cluster job's rollout pods running `tlt run-role`): they
  // connect to this TCP port (runtime/rl/rendezvous.h) and the files messages name travel over
  // the connection; a worker that dies is waited for until it connects again. 0: local child
  // processes.
  int listen_port = 0;
  bool listen_loopback = false;  // listen on 127.0.0.1 only (tests)
  // Remote only: the port the weight-sync group's store listens on (TLT_WEIGHT_SYNC_PORT, the
  // trainer pod's "weight-sync" port); every generation of the group reuses it.
  int weight_sync_port = 29501;
  int connect_timeout_s = 600;  // how long to wait for a remote worker to (re)connect
  // Remote only: the drafter pods awaited at the start (spec.roles.drafter.replicas; -1: every
  // slot), for at most drafter_start_grace_s; later ones join at a step boundary.
  int drafter_pods_at_start = -1;
  int drafter_start_grace_s = 60;
  std::string cache_dir;  // where the warm start is cached
};

struct RLRunResult {
  std::vector<StepReport> steps;
  double held_out_before = 0, held_out_after = 0;  // sampled held-out reward
  // Each held-out problem's mean reward before and after RL, on the same problems and sampling
  // seeds (runtime/rl/evaluation.h); the paired difference and its 95% interval (set when the
  // run finished).
  std::vector<double> held_out_before_per_problem, held_out_after_per_problem;
  int64_t held_out_samples = 0;  // responses per held-out problem
  // Share of held-out responses that mark a final answer (HeldOutResult::marked); -1: unknown (a
  // checkpoint written before it was recorded).
  double held_out_marked_before = -1, held_out_marked_after = -1;
  PairedDifference held_out_difference;
  bool interrupted = false;  // stopped by the stop flag (SIGTERM) before the last step
  std::string warm_start;    // path of the cached warm-start checkpoint
  // spec.task.dataset: rows whose prompt was longer than the budget (longPrompts skip, truncate).
  int64_t prompts_skipped = 0, prompts_truncated = 0;
  bool warm_start_trained = false;
};

// Events for the progress line: the policy's and the drafter's warm-start steps (step, loss),
// "step" (a StepReport).
struct RunCallbacks {
  std::function<void(int64_t step, double loss)> warm_start;
  std::function<void(int64_t step, double loss)> drafter_warm_start;
  std::function<void(const StepReport&)> step;
  std::function<void(const std::string&)> log;
  std::function<void(int worker, const std::string& state)> worker_state;
  // Asked at the start of every step (the step boundary): the workers the cluster's rebalancer
  // assigned to drafter training. They get no rollout requests this step and train the drafter
  // from the moment they are released (if drafter training is on; under --baseline they idle).
  // At least one worker always keeps generating: the highest indices are dropped first.
  std::function<std::vector<int>(int64_t step)> drafter_assignments;
};

StatusOr<RLRunResult> run_rl(const RLRunPlan& plan, const RunCallbacks& callbacks,
                             const std::atomic<bool>* stop);

}  // namespace tlt::rl
