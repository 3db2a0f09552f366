// bench/rollout's speculation ceilings: what verifying k tokens per request in one forward costs
// against k plain steps, the most any drafter could gain on this machine at each batch size (as if
// every draft were accepted and drafting cost nothing). The preset runs print it per width k
// (print_ceiling); the --model runs print the issue-19 table of forward times of 1, 8 and 16
// tokens (print_model_ceiling).
//
// Thread safety: one thread (LibTorch's intra-op threads as the process configured them).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/transformer.h"

namespace tlt::bench {

// Returns when the work queued on `target`'s device is done (a CUDA forward returns once its
// kernels are queued; a clock read after it waits here); at once on the CPU.
void finish_device(const model::Transformer& target);

// Seconds of one target forward of b x k new tokens per request over a cache already holding
// `context` positions per request (the fastest of `reps`, after two warm-ups), with bfloat16
// products when `bfloat16` (padded as the decode probe decides, as decoding does); `capacity`:
// positions the cache holds per request (0: just enough).
double forward_seconds(model::Transformer target, int64_t b, int64_t k, int64_t context, int reps,
                       bool bfloat16, int64_t capacity = 0);

// The speculation ceiling at each batch size: max over k of k x T(b, 1) / T(b, k), with the
// forward times of k = 1, 2, 3, 5, 7, 8, over `context` cached positions.
void print_ceiling(model::Transformer target, const std::vector<int>& batches, int64_t context,
                   bool bfloat16);

// The issue-19 table for a pretrained model: forward times of 1, 8 and 16 new tokens per request
// over a KV cache of ceiling_context + 128 positions (ceiling_context already filled; a model of
// shorter context gets what its positions allow), and the ceiling k x T(b,1)/T(b,k) at k = 8. The
// fastest of 5 (each after two warm-ups).
void print_model_ceiling(model::Transformer target, const std::vector<int>& batches,
                         int64_t ceiling_context, bool bfloat16);

}  // namespace tlt::bench
