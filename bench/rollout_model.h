// bench/rollout --model PATH: a pretrained llama/qwen2 model (GGUF file or Hugging Face
// directory, runtime/model/pretrained.h) instead of a preset trained on a corpus. --ceiling-only
// prints its load time, peak RSS and forward times with the speculation ceiling
// (rollout_ceiling.h), what bfloat16 products buy its training (rollout_precision.h) and what a
// GRPO group's shared prompt buys its update (rollout_sharing.h); otherwise the drafter is
// warm-started on the model's own answers to arithmetic-cot's training problems (rollout_drafter.h:
// rl::load_or_train_drafter_on_generations, as an RLJob with spec.model.path does; cached) and
// the decode ratios (rollout_compare.h) run on the task's held-out prompts through the model's
// chat template.
//
// Thread safety: one call per process (they configure LibTorch's threads).
#pragma once

#include "bench/rollout_options.h"

namespace tlt::bench {

// --model PATH --ceiling-only at each of o.table.batches, o.ceiling_context positions already
// cached. The process's exit code: 1 when the model does not load.
int model_ceiling(const RolloutOptions& o);

// --model PATH: the ceilings (unless o.prepare_only), the drafters of o.drafter.features
// warm-started and cached, then one table per temperature of o.temperatures (and their summary).
// With o.prepare_only it only warm-starts the drafters and prints their held-out agreement. The
// process's exit code: 1 when the model, its tokenizer or a warm start fails, or when a run that
// must reproduce plain decoding did not.
int model_compare(const RolloutOptions& o);

}  // namespace tlt::bench
