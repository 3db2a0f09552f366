#include "runtime/drafter/trainer.h"

#include <algorithm>
#include <exception>

#include "runtime/model/precision.h"

namespace tlt::drafter {
namespace {

int64_t clamp_levels(int64_t levels, int64_t t) {
  return std::clamp<int64_t>(levels, 1, std::max<int64_t>(1, std::min(kMaxLevels, t - 1)));
}

// The weight of each level-d base (B, T-d): mask at j+1 and at j+d (float, hidden's dtype).
torch::Tensor level_weight(const torch::Tensor& mask, int64_t d, torch::ScalarType dtype) {
  int64_t t = mask.size(1);
  torch::Tensor m = mask.to(dtype);
  return m.narrow(1, 1, t - d) * m.narrow(1, d, t - d);
}

}  // namespace

std::vector<torch::Tensor> unrolled_predictions(model::Drafter& drafter,
                                                const torch::Tensor& tokens,
                                                const torch::Tensor& hidden, int64_t levels) {
  int64_t b = tokens.size(0), t = tokens.size(1);
  levels = clamp_levels(levels, t);
  torch::Tensor first_tokens = tokens.narrow(1, 1, t - 1);          // (B, T-1): x_{j+1}
  torch::Tensor first_feats = hidden.narrow(1, 0, t - 1).detach();  // (B, T-1, C): h_j
  // Level d of base j sits at position j + d - 1 (level 1 at j).
  torch::Tensor base = model::sequential_positions(
      torch::zeros({b}, torch::TensorOptions().dtype(torch::kInt64).device(tokens.device())),
      t - 1);                                                                   // (B, T-1)
  if (levels == 1) return {drafter->forward(first_tokens, first_feats, base)};  // (B, T-1, C)
  model::DrafterImpl::LevelKV kv;
  std::vector<torch::Tensor> preds{
      drafter->forward_level(first_tokens, first_feats, base, &kv)};  // (B, T-1, C)
  for (int64_t d = 2; d <= levels; ++d) {
    preds.push_back(drafter->forward_level(tokens.narrow(1, d, t - d),        // x_{j+d}
                                           preds.back().narrow(1, 0, t - d),  // level d-1's
                                           base.narrow(1, 0, t - d) + (d - 1), &kv));
  }
  return preds;
}

// `target` is the drafter's own; its LM head is read through drafter->draft_head().
torch::Tensor drafter_loss(model::Drafter& drafter, model::Transformer& /*target*/,
                           const torch::Tensor& tokens, const torch::Tensor& hidden,
                           const torch::Tensor& mask, int64_t levels) {
  return drafter_loss(drafter, tokens, hidden, mask, levels, nullptr);
}

bool default_regression(const model::Drafter& drafter) {
  return !drafter->fused();
}

torch::Tensor drafter_loss(model::Drafter& drafter, const torch::Tensor& tokens,
                           const torch::Tensor& hidden, const torch::Tensor& mask, int64_t levels,
                           std::vector<torch::Tensor>* predictions,
                           std::optional<bool> regression) {
  int64_t t = tokens.size(1), c = drafter->fc->weight.size(0);
  bool regress = regression.value_or(default_regression(drafter));
  torch::Tensor h = model::final_hidden(hidden, c);  // (B, T, C): h_0..h_{T-1}
  std::vector<torch::Tensor> preds = unrolled_predictions(drafter, tokens, hidden, levels);
  if (predictions) *predictions = preds;
  // Over the draft vocabulary when one is set (K of V tokens: a SmolLM2 step's head shrinks
  // 24x at K = 2048), the target's distribution renormalised on it: the drafter can only draft
  // those tokens, so that is the distribution it should match.
  torch::Tensor rows = drafter->draft_head();  // (K, C), K = V without a draft vocabulary
  torch::Tensor total;
  double scale = 1.0;
  for (size_t k = 0; k < preds.size(); ++k) {
    int64_t d = int64_t(k) + 1;
    const torch::Tensor& pred = preds[k];                           // (B, T-d, C)
    torch::Tensor want = h.narrow(1, d, t - d).detach();            // (B, T-d, C): h_{j+d}
    torch::Tensor w = level_weight(mask, d, hidden.scalar_type());  // (B, T-d)
    torch::Tensor target_p;
    {
      torch::NoGradGuard no_grad;
      // (B, T-d, K); no head bias; the softmax in the hidden states' dtype whatever the product's.
      target_p = torch::softmax(torch::matmul(want, rows.t()).to(want.scalar_type()), -1);
    }
    // Logits in the hidden states' dtype (bfloat16 products under autocast are cast back).
    torch::Tensor logits = torch::matmul(pred, rows.t()).to(want.scalar_type());  // (B, T-d, K)
    torch::Tensor ce = -(target_p * torch::log_softmax(logits, -1)).sum(-1);      // (B, T-d)
    torch::Tensor per = ce;                                                       // (B, T-d)
    if (regress) {
      torch::Tensor reg =
          torch::smooth_l1_loss(pred.to(want.scalar_type()), want, at::Reduction::None).mean(-1);
      per = 0.5 * reg + 0.5 * ce;
    }
    torch::Tensor level = scale * (per * w).sum() / w.sum().clamp_min(1.0);
    total = total.defined() ? total + level : level;
    scale *= kLevelDecay;
  }
  return total;
}

void LevelAgreement::add(const LevelAgreement& o) {
  size_t n = std::max(agreed.size(), o.agreed.size());
  agreed.resize(n, 0), bases.resize(n, 0);
  for (size_t i = 0; i < o.agreed.size(); ++i) agreed[i] += o.agreed[i], bases[i] += o.bases[i];
}

double LevelAgreement::share(size_t level) const {
  return level < bases.size() && bases[level] > 0 ? double(agreed[level]) / double(bases[level])
                                                  : 0.0;
}

LevelAgreement greedy_agreement(model::Drafter& drafter, const torch::Tensor& tokens_in,
                                const torch::Tensor& hidden_in, const torch::Tensor& mask_in,
                                int64_t levels) {
  torch::NoGradGuard no_grad;
  torch::Device dev = drafter->fc->weight.device();  // the windows may come from the CPU
  torch::Tensor tokens = tokens_in.to(dev), hidden = hidden_in.to(dev), mask = mask_in.to(dev);
  int64_t t = tokens.size(1);
  std::vector<torch::Tensor> preds = unrolled_predictions(drafter, tokens, hidden, levels);
  LevelAgreement out;
  // The target's greedy token after each position 1..T-1, once for every level: (B, T-1).
  torch::Tensor greedy =
      drafter->logits(model::final_hidden(hidden.narrow(1, 1, t - 1), drafter->fc->weight.size(0)))
          .argmax(-1);
  torch::Tensor all;  // (B, T-d) bool: levels 1..d agree
  for (size_t k = 0; k < preds.size(); ++k) {
    int64_t d = int64_t(k) + 1;
    torch::Tensor drafted = drafter->draft_logits(preds[k]).argmax(-1);  // (B,T-d)
    torch::Tensor same = drafted.eq(greedy.narrow(1, d - 1, t - d));
    all = all.defined() ? all.narrow(1, 0, t - d) & same : same;
    torch::Tensor valid = level_weight(mask, d, torch::kFloat32).gt(0.5);  // (B, T-d)
    out.agreed.push_back((all & valid).sum().item<int64_t>());
    out.bases.push_back(valid.sum().item<int64_t>());
  }
  return out;
}

DrafterTrainer::DrafterTrainer(model::Drafter drafter, model::Transformer target,
                               double learning_rate, int64_t levels, bool bfloat16)
    : drafter_(std::move(drafter)),
      target_(std::move(target)),
      levels_(std::clamp<int64_t>(levels, 1, kMaxLevels)),
      bfloat16_(bfloat16) {
  optimizer_ = std::make_unique<torch::optim::AdamW>(
      drafter_->parameters(), torch::optim::AdamWOptions(learning_rate).weight_decay(0.0));
}

double DrafterTrainer::step(const torch::Tensor& tokens, const torch::Tensor& hidden,
                            const torch::Tensor& mask) {
  return *try_step(tokens, hidden, mask, {});
}

namespace {

// Thrown from a gradient hook to abandon a backward pass (the autograd engine hands a hook's
// exception back to the caller of backward()).
struct StepCancelled : std::exception {
  const char* what() const noexcept override { return "drafter step cancelled"; }
};

}  // namespace

std::optional<double> DrafterTrainer::try_step(const torch::Tensor& tokens_in,
                                               const torch::Tensor& hidden_in,
                                               const torch::Tensor& mask_in,
                                               const std::function<bool()>& cancelled) {
  // Windows read from buffer files are on the CPU; the step runs on the drafter's device (the
  // same tensors when they are there already).
  torch::Device dev = drafter_->fc->weight.device();
  torch::Tensor tokens = tokens_in.to(dev), hidden = hidden_in.to(dev), mask = mask_in.to(dev);
  auto stop = [&] { return cancelled && cancelled(); };
  if (stop()) return std::nullopt;
  drafter_->train();
  optimizer_->zero_grad();
  std::vector<torch::Tensor> preds;  // (B, T-d, C) per level
  torch::Tensor loss;                // () float32
  {
    model::Bfloat16Autocast mixed(hidden.device(), bfloat16_);
    loss = drafter_loss(drafter_, tokens, hidden, mask, levels_, &preds, regression_);
  }
  if (stop()) return std::nullopt;
  bool hook_cancelled = false;
  if (cancelled) {
    for (torch::Tensor& p : preds)
      p.register_hook([&](const torch::Tensor&) {
        if (cancelled()) {
          hook_cancelled = true;
          throw StepCancelled();
        }
      });
  }
  try {
    loss.backward();
  } catch (const std::exception&) {
    if (hook_cancelled) return std::nullopt;  // the hook's, as thrown or wrapped by the engine
    throw;
  }
  if (stop()) return std::nullopt;
  torch::nn::utils::clip_grad_norm_(drafter_->parameters(), 1.0);
  optimizer_->step();
  ++steps_;
  return loss.item<double>();
}

}  // namespace tlt::drafter
