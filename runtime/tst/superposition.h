// Token Superposition Training (TST): the math of the superposition phase.
//
// A raw sequence of s*L tokens becomes L bags of s consecutive tokens. The input at latent
// position l is the mean of bag l's s token embeddings (summed in fp32, divided by s); the
// target is the next bag's s tokens; the loss is the (weighted) mean of the s cross-entropies,
// all computed from one LM-head pass over L positions. The transformer therefore does exactly
// the work of a plain next-token step over L positions while reading s times more text.
// Method: Peng, Gigant, Quesnelle, "Token Superposition Training" (arXiv 2605.06546); see
// SEEDS.md section 2. With s = 1 every function here reduces to ordinary next-token training.
//
// Shapes: B batch, L latent positions, s bag size, C width, V vocabulary.
#pragma once

#include <torch/torch.h>

#include <string>

namespace tlt::tst {

inline constexpr int64_t kIgnore = -100;

// Mean embeddings of the bags: tokens (B, s*L) int64 -> (B, L, C) in the embedding's dtype,
// accumulated in fp32 (fp64 when the embedding is fp64).
torch::Tensor bag_embeddings(torch::nn::Embedding embed, const torch::Tensor& tokens, int64_t s);

// Labels (B, L, s): row l holds bag l+1's tokens, i.e. next-token labels shifted by s-1; the
// last row, whose next bag is not in the sequence, is kIgnore.
torch::Tensor bag_labels(const torch::Tensor& tokens, int64_t s);

// Weights of the s cross-entropies inside a bag, summing to 1: "uniform" (1/s each) or
// "power-law" (proportional to 1/(j+1), emphasising the nearest tokens). Returns (s,).
torch::Tensor bag_weights(int64_t s, const std::string& weighting, torch::Dtype dtype);

// Multi-hot cross-entropy: logits (B, L, V), labels (B, L, s), weights (s,). Mean over valid
// positions of sum_j w_j * CE(logits, label_j); a kIgnore label drops out and the remaining
// weights of that position are renormalised. With s = 1 this is next-token cross-entropy.
torch::Tensor multi_hot_ce(const torch::Tensor& logits, const torch::Tensor& labels,
                           const torch::Tensor& weights);

// The numerator of multi_hot_ce: the sum over scored positions (those with a valid label) of
// their per-position loss, a scalar in the accumulation dtype; 0 when no position is scored.
// Data parallelism divides it by the scored positions of the whole global batch.
torch::Tensor multi_hot_ce_sum(const torch::Tensor& logits, const torch::Tensor& labels,
                               const torch::Tensor& weights);

// The denominator of multi_hot_ce: positions of labels (B, L, s) with at least one label that is
// not kIgnore (bag weights are all positive).
int64_t scored_positions(const torch::Tensor& labels);

}  // namespace tlt::tst
