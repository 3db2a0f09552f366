// Attention for decoding on the CPU whose every output row is a function of that row's query and
// the keys it may see, nothing else: not the number of rows in the forward, not the batch's other
// requests, not how far the cache is padded. A verify forward of 8 drafted tokens then gives each
// token bit for bit what 8 one-token steps give it, which is what lets speculative decoding stay
// lossless when the linear layers run in bfloat16 (runtime/model/precision.h,
// Bfloat16Inference): LibTorch's padded softmax and matrix products group their sums by the
// padded length, and bfloat16 rounding turns those last-bit differences into different tokens.
//
// Each row sums in one fixed order over its visible keys, taken in cache order: a one-token
// step at position p and a tree node at depth d over the same prefix see the same keys in the
// same order once the node's ancestors are committed (runtime/model/kv_cache.h).
//
// Thread safety: pure function; runs its rows on LibTorch's intra-op threads.
#pragma once

#include <torch/torch.h>

namespace tlt::model {

// q (B, H, T, D), k and v (B, Hkv, S, D), float32 on the CPU, last dimension contiguous (the
// cache's views qualify); mask (B, 1, 1, T, S) additive, 0 where a query may see a key (see
// attention_mask). H must be a multiple of Hkv (query head h reads K/V head h / (H / Hkv)).
// Returns softmax(q k^T * scale + mask) v as (B, H, T, D) float32; a row that sees no key is 0.
// Throws c10::Error on other dtypes, devices or shapes.
torch::Tensor row_invariant_attention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& mask,
                                      double scale);

// Whether row_invariant_attention can serve a forward on these tensors: CPU, float32, no
// gradient wanted (it has no backward), and not switched off.
bool row_invariant_attention_applies(const torch::Tensor& q, const torch::Tensor& k);

// On unless switched off, for the whole process: tests switch it off to show what it prevents
// (the forward then takes LibTorch's padded softmax, as on a GPU). Thread-safe.
void enable_row_invariant_attention(bool on);

}  // namespace tlt::model
