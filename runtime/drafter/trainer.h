// Training the EAGLE drafter on the target's own hidden states (TLT's adaptive drafter).
//
// For a sequence x_0..x_{T-1} with target hidden states h_0..h_{T-1}, the drafter reads pairs
// (h_j, x_{j+1}) for j < T-1 and predicts h_{j+1}. The loss per position is
//   0.5 * SmoothL1(h_hat_{j+1}, h_{j+1}) + 0.5 * CE(softmax(head(h_{j+1})), head(h_hat_{j+1}))
// i.e. feature regression plus a soft cross-entropy against the target's own next-token
// distribution, averaged over the positions the mask selects (response tokens). With a draft
// vocabulary set on the drafter (K of V tokens, spec.drafter.vocabSubset), the cross-entropy runs
// over those K tokens, the target's distribution renormalised on them: the tokens the drafter
// can draft, at K/V of the head's cost.
//
// Thread safety: one thread at a time per trainer.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "runtime/model/drafter.h"

namespace tlt::drafter {

class DrafterTrainer {
 public:
  DrafterTrainer(model::Drafter drafter, model::Transformer target, double learning_rate);

  // One optimizer step. tokens (B, T) int64, hidden (B, T, C) target hidden states, mask (B, T)
  // bool or float: 1 where position j+1 is a trained target (the first column is ignored).
  // Returns the loss before the step.
  double step(const torch::Tensor& tokens, const torch::Tensor& hidden, const torch::Tensor& mask);
  int64_t steps() const { return steps_; }

 private:
  model::Drafter drafter_;
  model::Transformer target_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  int64_t steps_ = 0;
};

// The loss above without a step, for evaluation. Same arguments as DrafterTrainer::step.
torch::Tensor drafter_loss(model::Drafter& drafter, model::Transformer& target,
                           const torch::Tensor& tokens, const torch::Tensor& hidden,
                           const torch::Tensor& mask);

}  // namespace tlt::drafter
