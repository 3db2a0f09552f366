// bench/rollout --model PATH --ceiling-only: what sharing a GRPO group's prompt buys the policy
// update (rl::GrpoOptions::share_prompts), whole sequences against the prompt run once per pass,
// side by side in one run.
//
// Thread safety: one thread (LibTorch's intra-op threads as the process configured them).
#pragma once

#include "runtime/model/transformer.h"

namespace tlt::bench {

// One whole update (rl::PolicyTrainer::update: reference and old log-probabilities, two minibatch
// steps) over one group of 8 answers of long-tailed lengths to one 96-token prompt, the fastest of
// 2 each, products in bfloat16 where the CPU has them natively. The update moves the target's
// weights a little. Prints one line.
void print_update_sharing(const model::Transformer& target);

}  // namespace tlt::bench
