// bench/rollout --model PATH: a pretrained llama/qwen2 model (GGUF file or Hugging Face
// directory, runtime/model/pretrained.h) instead of a preset trained on a corpus. --ceiling-only
// prints its load time, peak RSS, forward times and speculation ceiling, and what bfloat16 products
// and a GRPO group's shared prompt buy its training; otherwise the drafter is warm-started on the
// model's own answers to arithmetic-cot's training problems (cached) and the side-by-side tables
// (rollout_compare.h) run on the task's held-out prompts through the model's chat template.
// Only in builds with the pretrained loader (TLT_HAVE_PRETRAINED).
//
// Thread safety: one call per process (they configure LibTorch's threads).
#pragma once

#include <string>
#include <vector>

#include "bench/rollout_compare.h"

namespace tlt::bench {

// How a --model run's drafter is warm-started (--drafter-steps, --drafter-vocab,
// --drafter-prompts).
// The defaults are the warm start docs/benchmarks.md measures SmolLM2 with: about 14 minutes on
// two cores, cached.
struct ModelDrafter {
  int steps = 1600, vocab = 2048, prompts = 384, levels = 3, layers = 1;
  double temperature = 1.0;                   // the warm start's sampling (--drafter-temperature)
  std::vector<std::string> features{"last"};  // --drafter-features: the drafters measured
};

// --model PATH --ceiling-only at each batch size, `ceiling_context` positions already cached
// (--ceiling-context). The process's exit code: 1 when the model does not load.
int model_ceiling(const std::string& path, const std::vector<int>& batches, int threads,
                  int64_t ceiling_context);

// --model PATH: the ceilings (unless `prepare_only`), the drafters of d.features warm-started and
// cached, then one side-by-side table per temperature (and their summary). With `prepare_only`
// it only warm-starts the drafters and prints their held-out agreement. The process's exit code:
// 1 when the model, its tokenizer or a warm start fails, or when a run that must reproduce plain
// decoding did not.
int model_compare(const std::string& path, const Table& t, const ModelDrafter& d,
                  const std::vector<double>& temperatures, bool prepare_only,
                  int64_t ceiling_context);

}  // namespace tlt::bench
