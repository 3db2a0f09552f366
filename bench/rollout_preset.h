// bench/rollout --tokens FILE: a preset target (micro, tiny, small) trained with next-token loss on
// a tokenized corpus (the State of the Union by default: a TSTPretrainJob's default data), cached;
// never a random model, whose speculation numbers mean nothing. Then its drafter, warm-started as
// an RLJob on that checkpoint would warm-start it (rollout_drafter.h), on the target's own
// answers to windows of the training documents; the speculation ceiling (rollout_ceiling.h) at
// mid-response; and the decode ratios (rollout_compare.h) on held-out documents' windows with long
// responses.
//
// Thread safety: one call per process (it configures LibTorch's threads).
#pragma once

#include "bench/rollout_options.h"

namespace tlt::bench {

// Reads o.tokens, trains or loads the target and (unless only the ceiling is measured) its
// drafters, cached under data::cache_root(); then, unless o.prepare_only, prints the ceiling and
// (unless o.ceiling_only) the tables. The process's exit code: 1 when the corpus or a warm start
// fails, or when a run that must reproduce plain decoding did not.
int preset_compare(const RolloutOptions& o);

}  // namespace tlt::bench
