// Training the EAGLE drafter on the target's own hidden states (TLT's adaptive drafter).
//
// For a sequence x_0..x_{T-1} with target features f_0..f_{T-1} (width F: the final hidden states
// h_j, or the fused features whose last C columns are h_j; model::DrafterImpl), the drafter reads
// pairs (f_j, x_{j+1}) for j < T-1 and predicts h_{j+1}. The loss per position is
//   0.5 * SmoothL1(h_hat_{j+1}, h_{j+1}) + 0.5 * CE(softmax(head(h_{j+1})), head(h_hat_{j+1}))
// i.e. feature regression plus a soft cross-entropy against the target's own next-token
// distribution, averaged over the positions the mask selects (response tokens). Without
// regression (the default for a fused drafter, as EAGLE-3 trains: default_regression) the loss
// is the cross-entropy alone, so the drafter's output need not resemble h at all, only give the
// target's token distribution; through the unrolled levels below that is EAGLE-3's
// "training-time test". With a draft
// vocabulary set on the drafter (K of V tokens, spec.drafter.vocabSubset), the cross-entropy runs
// over those K tokens, the target's distribution renormalised on them: the tokens the drafter
// can draft, at K/V of the head's cost.
//
// Unrolled training ("training-time test", as EAGLE-3 trains): drafting feeds the drafter its
// own prediction from level 2 of a chain on, a feature it never reads when trained on the
// target's only. With `levels` L > 1 the loss also runs the drafter as drafting does: level d of
// base j reads (its own level d-1 prediction of h_{j+d-1}, x_{j+d}) at position j+d-1 and
// predicts h_{j+d}, attending to the target's features at positions <= j and to its own chain
// of levels 2..d from the same base, exactly what a chain drafted after position j sees (the
// drafter's cache holds the target's features up to j). Level d's loss is weighted
// kLevelDecay^(d-1). Each level costs about one more forward and backward of the window
// (model::DrafterImpl::forward_level keeps the earlier levels' keys and values).
//
// Thread safety: one thread at a time per trainer.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/model/drafter.h"

namespace tlt::drafter {

// The weight of level d's loss relative to level d-1's in unrolled training.
constexpr double kLevelDecay = 0.8;
// The most levels unrolled training runs.
constexpr int64_t kMaxLevels = 8;

class DrafterTrainer {
 public:
  // levels in [1, kMaxLevels]: 1 trains on the target's features only (EAGLE-1). `bfloat16`:
  // the loss's matrix products run in bfloat16 (model::Bfloat16Autocast; weights, gradients and
  // AdamW's state stay float32, the logits and the loss are float32), as the policy update does
  // under spec.model.dtype. Only the drafter's training changes; its drafts are verified as ever.
  DrafterTrainer(model::Drafter drafter, model::Transformer target, double learning_rate,
                 int64_t levels = 1, bool bfloat16 = false);
  // Overrides default_regression(drafter) for this trainer's steps.
  void set_regression(bool on) { regression_ = on; }

  // One optimizer step. tokens (B, T) int64, hidden (B, T, F) target features, mask (B, T)
  // bool or float: 1 where position j+1 is a trained target (the first column is ignored); on
  // any device (moved to the drafter's). Returns the loss before the step.
  double step(const torch::Tensor& tokens, const torch::Tensor& hidden, const torch::Tensor& mask);

  // step() that gives up as soon as `cancelled()` returns true (a preempted spot trainer). It is
  // asked before the forward, after it, during the backward (once per unrolled level, when that
  // level's gradient is complete, before the backward runs through the drafter layer that made
  // it) and before the optimizer step: levels() + 3 times in a step that runs to its end. Returns
  // the loss, or nullopt when cancelled: the drafter's weights, the optimizer's state and steps()
  // are then as before the call (parameters' .grad may hold a partial sum, which the next step
  // zeroes). `cancelled` may be called from autograd's threads (a CUDA backward) and must be
  // safe there, as an atomic load is; empty: as step().
  std::optional<double> try_step(const torch::Tensor& tokens, const torch::Tensor& hidden,
                                 const torch::Tensor& mask, const std::function<bool()>& cancelled);
  int64_t steps() const { return steps_; }
  int64_t levels() const { return levels_; }

 private:
  model::Drafter drafter_;
  model::Transformer target_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  int64_t levels_ = 1;
  bool bfloat16_ = false;
  std::optional<bool> regression_;  // unset: default_regression(drafter_)
  int64_t steps_ = 0;
};

// Whether the loss regresses hidden states for `drafter` unless told: yes for a `last` drafter
// (EAGLE-1/2), no for a fused one (EAGLE-3: the tokens' cross-entropy through the levels only).
bool default_regression(const model::Drafter& drafter);

// The loss above without a step, for evaluation. Same arguments as DrafterTrainer::step; levels
// in [1, min(kMaxLevels, T-1)] (clamped).
torch::Tensor drafter_loss(model::Drafter& drafter, model::Transformer& target,
                           const torch::Tensor& tokens, const torch::Tensor& hidden,
                           const torch::Tensor& mask, int64_t levels = 1);

// drafter_loss that also returns each level's prediction (unrolled_predictions' element d-1),
// for callers that watch the backward pass level by level. `regression`: whether the loss has
// the hidden-state regression term; unset: default_regression(drafter).
torch::Tensor drafter_loss(model::Drafter& drafter, const torch::Tensor& tokens,
                           const torch::Tensor& hidden, const torch::Tensor& mask, int64_t levels,
                           std::vector<torch::Tensor>* predictions,
                           std::optional<bool> regression = std::nullopt);

// The drafter's predictions level by level as drafting makes them (above): element d-1 is
// (B, T-d, C), at index j the level-d prediction of h_{j+d} from base j. tokens (B, T), hidden
// (B, T, F); levels clamped to [1, min(kMaxLevels, T-1)]. Gradients flow through every level.
std::vector<torch::Tensor> unrolled_predictions(model::Drafter& drafter,
                                                const torch::Tensor& tokens,
                                                const torch::Tensor& hidden, int64_t levels);

// How far greedy chains drafted from each base would be accepted. A base j counts at level d
// when positions j+1..j+d are all in the mask (a response's; drafting starts at the prompt's
// last position); agreed[d-1] of the bases[d-1] such bases have draft tokens at levels 1..d that
// all equal the target's greedy tokens (argmax of its full head at h_{j+1}..h_{j+d}). On the
// target's greedy text, sum over d of agreed/bases is the greedy chain's accepted length per
// verification (bonus token not counted). Without gradient; same arguments as drafter_loss.
struct LevelAgreement {
  std::vector<int64_t> agreed, bases;  // one per level
  void add(const LevelAgreement& o);   // sums counts (levels: the larger of the two)
  double share(size_t level) const;    // agreed / bases at 0-based level, 0 without bases
};
LevelAgreement greedy_agreement(model::Drafter& drafter, const torch::Tensor& tokens,
                                const torch::Tensor& hidden, const torch::Tensor& mask,
                                int64_t levels);

}  // namespace tlt::drafter
