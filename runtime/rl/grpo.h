// GRPO (group relative policy optimisation) math: group-normalised advantages and the
// token-level clipped objective with a KL penalty to a reference policy.
//
//   A_i      = (r_i - mean(group)) / (std(group) + eps), std with Bessel's correction; a group
//              whose rewards are all equal gets advantage 0 (it carries no signal).
//   ratio_t  = exp(logp_new_t - logp_old_t)
//   pg_t     = -min(ratio_t * A, clip(ratio_t, 1 - clip, 1 + clip) * A)
//   kl_t     = exp(logp_ref_t - logp_new_t) - (logp_ref_t - logp_new_t) - 1   (k3 estimator, >= 0)
//   loss     = sum_t mask_t * (pg_t + kl_coef * kl_t) / sum_t mask_t   (token-level mean over
//              all response tokens of the batch, so long responses are not down-weighted), or
//            = mean_i [sum_t mask_it * (pg_it + kl_coef * kl_it) / sum_t mask_it]   (sequence
//              mean, GRPO's original form: each response weighs the same, so a group's few long
//              failed responses cannot outweigh its short correct one)
//
// Shapes: P prompts, G responses per prompt, B = P*G sequences, T response positions, V vocab.
#pragma once

#include <torch/torch.h>

namespace tlt::rl {

// rewards (P, G) -> advantages (P, G).
torch::Tensor group_advantages(const torch::Tensor& rewards, double eps = 1e-6);

// Log-probabilities of `tokens` (B, T) under `logits` (B, T, V): (B, T).
torch::Tensor token_logprobs(const torch::Tensor& logits, const torch::Tensor& tokens);

enum class LossAggregation { kTokenMean, kSequenceMean };

struct GrpoLoss {
  torch::Tensor loss;          // scalar, differentiable through logp_new
  double clip_fraction = 0.0;  // share of response tokens whose ratio was clipped
  double kl = 0.0;             // mean k3 KL to the reference over response tokens
};

// logp_new, logp_old, logp_ref, mask: (B, T); advantages: (B,).
// clip_fraction and kl are token-level means under either aggregation.
GrpoLoss grpo_loss(const torch::Tensor& logp_new, const torch::Tensor& logp_old,
                   const torch::Tensor& logp_ref, const torch::Tensor& advantages,
                   const torch::Tensor& mask, double clip, double kl_coef,
                   LossAggregation aggregation = LossAggregation::kTokenMean);

}  // namespace tlt::rl
