// The plan of one RL run (runtime/rl/run.h's run_rl), the result it returns and the events it
// reports on the way.
//
// The plan carries the job spec's parts whole (api/spec.h: model, task, reward, algorithm,
// speculative decoding, drafter, checkpoints): a knob keeps its spec name from the manifest to
// the worker, and its default is api/spec.h's and nowhere else's. The other fields are what the
// runtime decides for this run (its directories, worker slots, ports, the baseline switch) or
// constants of the drafter's warm start that no spec field sets. runtime/rl/job_setup.h builds
// the plan of a job's runs; tests build their own.
//
// Errors: validate() returns InvalidArgument for a plan no run can start from (no run
// directory, no rollout worker beside the drafter slots).
// Thread safety: plain values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/spec.h"
#include "api/status.h"
#include "runtime/rl/paired.h"
#include "runtime/rl/step_report.h"

namespace tlt::rl {

struct RLRunPlan {
  std::string job = "rljob";  // metadata.name
  // The spec's parts. model.path (runtime/model/model_source.h): when set, the policy and the
  // reference start from that model, which reads through its own tokenizer and chat template
  // (runtime/rl/model_codec.h); model.preset is ignored. Workers get its architecture in their
  // setup message and its weights from the trainer, as for a preset.
  api::ModelSpec model;
  api::TaskSpec task;  // the generated task, or task.dataset's files when its path is set
  api::RewardSpec reward;
  api::AlgorithmSpec algorithm;      // GRPO and the policy's supervised warm start
  api::SpeculativeSpec speculative;  // the workers' engines (their setup message carries it)
  api::DrafterSpec drafter;          // the drafter, its warm start and its online training
  api::CheckpointSpec checkpoint;    // every_steps and keep; the run's directory: checkpoint_dir
  api::ReportSpec report;            // one response in report.samples goes to samples_path

  bool baseline = false;  // speculation and drafter training off
  int workers = 2;        // all worker processes, the drafter pods' included
  // The last this-many workers are dedicated drafter trainers (spec.roles.drafter.replicas;
  // remote workers: the slots for drafter pods, spec.roles.drafter.maxReplicas): they never
  // generate and train the drafter through every rollout phase.
  int drafter_role_workers = 0;
  // The drafter warm start's optimiser (rl::drafter_warm_start, before step 1, cached next to the
  // policy's); its steps and prompts are drafter.warm_start_*. Skipped with `baseline`.
  double drafter_warm_start_learning_rate = 1e-3;
  int64_t drafter_warm_start_batch = 16;
  int32_t drafter_warm_start_max_tokens = 256;  // solutions cut to this (and max response tokens)
  // Drafter frozen after this many steps of training (-1: never): the benchmark's control.
  int64_t freeze_drafter_after = -1;
  std::string run_dir;         // scratch (runtime/rl/run_dir.h): weights, buffers (required)
  std::string checkpoint_dir;  // checkpoint.path/<run label>; empty: no checkpoints
  // The run's scored responses (runtime/rl/samples.h), in the job's report directory; empty:
  // none recorded.
  std::string samples_path;
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
  std::string cache_dir;  // where the warm starts are cached
  // The group of trainer ranks (spec.roles.trainer.replicas; runtime/rl/trainer_ranks.h): 1 is
  // this process alone. Local (listen_port 0): ranks 1..N-1 are `tlt run-role` processes of
  // trainer_job_file (the job as JSON), their logs and rendezvous under trainer_dir. Remote:
  // they are the trainer pods, meeting this one at trainer_group_port.
  int trainer_ranks = 1;
  int trainer_group_port = 29502;  // api::kDefaultTrainerGroupPort
  // Remote: this pod's name as the other ranks reach it (TLT_TRAINER_GROUP_ADDRESS): 127.0.0.1
  // or localhost keeps Gloo on loopback, any other name (or none) binds this host's address.
  std::string trainer_group_host;
  std::string trainer_job_file, trainer_dir;

  // What the spec's parts mean for this run.
  bool pretrained() const { return !model.path.empty(); }  // model.path, not a preset
  std::string preset() const { return model.effective_preset(); }
  std::string task_name() const { return task.effective_name(); }  // "" for a dataset
  uint64_t task_seed() const { return uint64_t(task.seed); }
  bool free_text() const { return task.free_text_answer(pretrained()); }  // TaskOptions
  // Held-out problems evaluated: a dataset's held-out rows, else the generated task's.
  int64_t held_out() const { return task.has_dataset() ? task.dataset.held_out : task.held_out; }
  uint64_t seed() const { return uint64_t(algorithm.seed); }
  // 0 with model.path unless the spec asks for a warm start: the policy is the model as loaded.
  int64_t warm_start_steps() const { return algorithm.effective_warm_start_steps(pretrained()); }
  int64_t rollout_workers() const { return std::max(1, workers - drafter_role_workers); }
  // Whether the rollouts speculate, and whether step `step`'s released workers train the drafter
  // (neither under `baseline`).
  bool speculates() const { return !baseline && speculative.enabled; }
  bool trains_drafter(int64_t step) const;

  Status validate() const;
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
  // The trainer ranks the policy updates ran on (RLRunPlan::trainer_ranks), each rank's peak
  // resident memory and AdamW bytes after the last update, rank r at [r].
  int trainer_ranks = 1;
  std::vector<int64_t> trainer_peak_rss_bytes, trainer_optimizer_bytes;
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

}  // namespace tlt::rl
