#include "runtime/drafter/trainer.h"

namespace tlt::drafter {

// `target` is the drafter's own; its LM head is read through drafter->draft_head().
torch::Tensor drafter_loss(model::Drafter& drafter, model::Transformer& /*target*/,
                           const torch::Tensor& tokens, const torch::Tensor& hidden,
                           const torch::Tensor& mask) {
  int64_t b = tokens.size(0), t = tokens.size(1);
  torch::Tensor in_tokens = tokens.narrow(1, 1, t - 1);                 // (B, T-1): x_{j+1}
  torch::Tensor in_feats = hidden.narrow(1, 0, t - 1).detach();         // (B, T-1, C): h_j
  torch::Tensor want = hidden.narrow(1, 1, t - 1).detach();             // (B, T-1, C): h_{j+1}
  torch::Tensor w = mask.narrow(1, 1, t - 1).to(hidden.scalar_type());  // (B, T-1)
  torch::Tensor positions = model::sequential_positions(
      torch::zeros({b}, torch::TensorOptions().dtype(torch::kInt64).device(tokens.device())),
      t - 1);
  torch::Tensor pred = drafter->forward(in_tokens, in_feats, positions);  // (B, T-1, C)
  torch::Tensor reg = torch::smooth_l1_loss(pred, want, at::Reduction::None).mean(-1);  // (B,T-1)
  // Over the draft vocabulary when one is set (K of V tokens: a SmolLM2 step's head shrinks
  // 24x at K = 2048), the target's distribution renormalised on it: the drafter can only draft
  // those tokens, so that is the distribution it should match.
  torch::Tensor rows = drafter->draft_head();  // (K, C), K = V without a draft vocabulary
  torch::Tensor target_p;
  {
    torch::NoGradGuard no_grad;
    target_p = torch::softmax(torch::matmul(want, rows.t()), -1);  // (B, T-1, K); no head bias
  }
  torch::Tensor ce =
      -(target_p * torch::log_softmax(torch::matmul(pred, rows.t()), -1)).sum(-1);  // (B, T-1)
  torch::Tensor per = 0.5 * reg + 0.5 * ce;
  return (per * w).sum() / w.sum().clamp_min(1.0);
}

DrafterTrainer::DrafterTrainer(model::Drafter drafter, model::Transformer target,
                               double learning_rate)
    : drafter_(std::move(drafter)), target_(std::move(target)) {
  optimizer_ = std::make_unique<torch::optim::AdamW>(
      drafter_->parameters(), torch::optim::AdamWOptions(learning_rate).weight_decay(0.0));
}

double DrafterTrainer::step(const torch::Tensor& tokens, const torch::Tensor& hidden,
                            const torch::Tensor& mask) {
  drafter_->train();
  optimizer_->zero_grad();
  torch::Tensor loss = drafter_loss(drafter_, target_, tokens, hidden, mask);
  loss.backward();
  torch::nn::utils::clip_grad_norm_(drafter_->parameters(), 1.0);
  optimizer_->step();
  ++steps_;
  return loss.item<double>();
}

}  // namespace tlt::drafter
