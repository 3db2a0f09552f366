// bench/rollout --tokens FILE: a preset target (micro, tiny, small) trained with next-token loss on
// a tokenized corpus (the State of the Union by default: a TSTPretrainJob's default data), cached;
// never a random model, whose speculation numbers mean nothing. Then its drafter, trained on the
// target's own generations, the speculation ceiling (rollout_ceiling.h) at mid-response, and the
// decode ratios (rollout_compare.h) on held-out documents' prompts with long responses.
//
// Thread safety: one call per process (it configures LibTorch's threads).
#pragma once

#include "bench/rollout_options.h"

namespace tlt::bench {

// Reads o.tokens, trains or loads the target and its drafter (cached under data::cache_root()),
// then, unless o.prepare_only, prints the ceiling and (unless o.ceiling_only) the tables. The
// process's exit code: 1 when the corpus, a cache or the drafter's vocabulary fails, or when a
// run that must reproduce plain decoding did not.
int preset_compare(const RolloutOptions& o);

}  // namespace tlt::bench
