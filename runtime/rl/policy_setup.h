// The models an RL run starts from (runtime/rl/run.h): the task, the policy (a preset with the
// ASCII codec of runtime/rl/text.h, or spec.model.path's model with its own tokenizer), its
// supervised warm start (cached under RLRunPlan::cache_dir/rl), the frozen reference, and the
// drafter with its warm start (skipped under `baseline` or spec.drafter.warmStartSteps 0).
//
// Random draws: the preset's and the reference's initialisation seed from plan.seed(), the drafter
// from mix_seeds(seed, 7); set_up_policy ends by seeding LibTorch with mix_seeds(seed, 11), so the
// draws after it do not depend on whether the drafter warm start ran.
//
// Errors: the task's, the model source's and the warm starts' Status (InvalidArgument for a
// spec.model.path without weights, an unknown spec.drafter.features); Aborted when `cancelled`
// stopped a warm start. `out` keeps
// what was set up before an error (the warm start's path included).
//
// Ownership: `out` owns the models and the codec; `codec` points at `own_codec` or at the
// process-wide ASCII codec. Thread safety: call from one thread; it seeds LibTorch's global RNG.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"
#include "runtime/model/drafter.h"
#include "runtime/model/model_source.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/plan.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"

namespace tlt::rl {

// The longest prompt an RLJob of a pretrained model is sized for, in tokens, chat template
// included (arithmetic-cot's longest, 40 operations, takes ~200 of SmolLM2's). The rollout
// engines' KV caches hold this plus spec.algorithm.maxResponseTokens per row, not the model's
// whole context (8192 positions of SmolLM2 would cost 377 MB per row).
constexpr int64_t kPromptBudget = 768;

struct PolicySetup {
  std::unique_ptr<Task> task;
  model::ModelConfig cfg;
  model::ModelCard card;             // written beside checkpoints (model.json) so that they export
  std::unique_ptr<Codec> own_codec;  // a pretrained model's tokenizer
  const Codec* codec = &ascii_codec();  // own_codec, or the presets' ASCII codec
  int64_t max_seq = 0;                  // positions the rollout engines are sized for
  bool bfloat16 = false;       // spec.model.dtype: update and rollouts multiply in bfloat16
  std::string model_key;       // the preset, or the model file's identity
  std::string warm_start_key;  // the cached warm start's path (the drafter's cache key base)
  std::string warm_start;      // RLRunResult::warm_start: "" when the policy has none
  bool warm_start_trained = false;
  int64_t prompts_skipped = 0, prompts_truncated = 0;      // a dataset's longPrompts (DatasetTask)
  model::Transformer policy{nullptr}, reference{nullptr};  // reference: frozen, eval mode
  model::Drafter drafter{nullptr};
  // The drafter warm start's draft vocabulary (pretrained models): the workers' until they have
  // counted their own generations.
  std::vector<int64_t> drafter_vocab_ids;
};

// Sets up *out for `plan`; progress and log lines go to cb.warm_start, cb.drafter_warm_start
// and cb.log.
Status set_up_policy(const RLRunPlan& plan, const RunCallbacks& cb, std::function<bool()> cancelled,
                     PolicySetup* out);

}  // namespace tlt::rl
