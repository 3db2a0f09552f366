// bench/rollout --model PATH --ceiling-only: what bfloat16 matrix products (spec.model.dtype) buy
// training on this CPU, float32 against bfloat16 side by side in one run: the policy update's
// forward and backward, and one optimizer step of the drafter's training (the warm start's and
// the spot trainers'). Random tokens and features: the cost does not depend on them.
//
// Thread safety: one thread (LibTorch's intra-op threads as the process configured them); each
// call leaves the target's weights as they were and its gradients zeroed.
#pragma once

#include "api/status.h"
#include "runtime/model/transformer.h"

namespace tlt::bench {

// The forward and backward of the policy's log-probabilities (rl::sequence_logprobs) over one
// micro-batch of 4 rows of 64 prompt + 192 response tokens (the trainer's 1024-token budget; less
// for a model of shorter context), the fastest of 3 each. Prints one line.
void print_update_precision(model::Transformer target);

// One optimizer step of a one-layer drafter at the target's width over 16 windows of 64
// positions, 3 unrolled levels and a 2048-token draft vocabulary (an RLJob's defaults for a real
// model), the fastest of 3 each after one warm-up step. Prints one line; the drafter's error when
// its draft vocabulary cannot be set.
Status print_drafter_precision(model::Transformer target);

}  // namespace tlt::bench
