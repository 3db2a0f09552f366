#include "runtime/rl/grpo.h"

namespace tlt::rl {

torch::Tensor group_advantages(const torch::Tensor& rewards, double eps) {
  torch::Tensor mean = rewards.mean(1, /*keepdim=*/true);  // (P, 1)
  torch::Tensor std = rewards.size(1) > 1 ? rewards.std(1, /*unbiased=*/true, true)
                                          : torch::zeros_like(mean);  // (P, 1)
  torch::Tensor adv = (rewards - mean) / (std + eps);
  return torch::where(std > 0, adv, torch::zeros_like(adv));
}

torch::Tensor token_logprobs(const torch::Tensor& logits, const torch::Tensor& tokens) {
  return torch::log_softmax(logits, -1).gather(2, tokens.unsqueeze(-1)).squeeze(-1);
}

GrpoLoss grpo_loss(const torch::Tensor& logp_new, const torch::Tensor& logp_old,
                   const torch::Tensor& logp_ref, const torch::Tensor& advantages,
                   const torch::Tensor& mask, double clip, double kl_coef,
                   LossAggregation aggregation) {
  torch::Tensor m = mask.to(logp_new.scalar_type());
  torch::Tensor a = advantages.to(logp_new.scalar_type()).unsqueeze(1);  // (B, 1)
  torch::Tensor ratio = torch::exp(logp_new - logp_old.detach());        // (B, T)
  torch::Tensor clipped = torch::clamp(ratio, 1.0 - clip, 1.0 + clip);
  torch::Tensor pg = -torch::min(ratio * a, clipped * a);
  torch::Tensor d = logp_ref.detach() - logp_new;
  torch::Tensor kl = torch::exp(d) - d - 1.0;
  torch::Tensor n = m.sum().clamp_min(1.0);
  GrpoLoss out;
  torch::Tensor per_token = (pg + kl_coef * kl) * m;  // (B, T)
  if (aggregation == LossAggregation::kSequenceMean) {
    torch::Tensor per_row = per_token.sum(1) / m.sum(1).clamp_min(1.0);  // (B,)
    out.loss = per_row.mean();
  } else {
    out.loss = per_token.sum() / n;
  }
  torch::NoGradGuard no_grad;
  torch::Tensor was_clipped = ((ratio - clipped).abs() > 1e-12).to(m.scalar_type());
  out.clip_fraction = ((was_clipped * m).sum() / n).item<double>();
  out.kl = ((kl * m).sum() / n).item<double>();
  return out;
}

}  // namespace tlt::rl
