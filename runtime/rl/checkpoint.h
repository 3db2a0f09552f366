// RL checkpoints: what `--resume` continues from (spec.checkpoint.path/<run label>/).
//
//   <root>/step-N/        the policy and its AdamW state (PolicyTrainer::save), drafter.ckpt,
//                         state.json (the RLCheckpointState below)
//   <root>/model.json     the policy's model card, so that `tlt export` reads step-N/ back
//   <root>/latest         "step-N": names a step directory only once everything in it is written
//
// Every file is written through io::atomic_write (runtime/io/atomic_file.h), so a crash leaves
// the previous checkpoint readable. After a save only the newest `keep` step directories remain.
//
// Errors: save returns the first failing write's Status. load returns NotFound when `latest` is
// missing, Corruption naming state.json when it is not an RL state, and the trainer's and the
// drafter's load errors with the step directory as context.
//
// Ownership: the trainer and the drafter are the caller's; load writes their weights in place.
// Thread safety: one caller per root at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/status.h"
#include "runtime/model/drafter.h"
#include "runtime/model/model_source.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/step_report.h"

namespace tlt::rl {

// The run's state beside the weights (state.json).
struct RLCheckpointState {
  int64_t step = 0;  // steps completed
  int64_t drafter_version = 0;
  double held_out_before = 0;
  // Empty when written before the paired comparison was recorded (the caller re-evaluates).
  std::vector<double> held_out_before_per_problem;
  double held_out_marked_before = -1;  // -1: not recorded
  std::vector<StepReport> steps;       // every completed step's report, resumed runs' included
};

// Writes <root>/step-<state.step>/ and points `latest` at it; keeps the newest `keep`.
Status save_rl_checkpoint(const std::string& root, int64_t keep, const RLCheckpointState& state,
                          const PolicyTrainer& trainer, const model::Drafter& drafter,
                          const model::ModelCard& card);

// Whether <root>/latest names a checkpoint (what load_rl_checkpoint would resume from).
bool rl_checkpoint_exists(const std::string& root);

// Loads the step `latest` names into `trainer` and `drafter`; *dir is set to its directory.
StatusOr<RLCheckpointState> load_rl_checkpoint(const std::string& root, PolicyTrainer& trainer,
                                               model::Drafter& drafter, std::string* dir);

}  // namespace tlt::rl
