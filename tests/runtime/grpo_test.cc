// GRPO advantages and loss against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/rl/grpo.h"

namespace tlt::rl {
namespace {

TEST(Grpo, AdvantagesAreGroupNormalised) {
  torch::Tensor r = torch::tensor(
      {{1.0, 0.0, 0.0, 1.0}, {1.0, 1.0, 1.0, 1.0}, {2.0, 0.0, 1.0, 1.0}}, torch::kFloat64);
  torch::Tensor a = group_advantages(r, 0.0);
  // Group 0: mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735 -> +-0.866025.
  EXPECT_NEAR(a[0][0].item<double>(), 0.5 / std::sqrt(1.0 / 3.0), 1e-12);
  EXPECT_NEAR(a[0][1].item<double>(), -0.5 / std::sqrt(1.0 / 3.0), 1e-12);
  // Group 1: all equal -> no signal, advantage 0 (not NaN).
  EXPECT_EQ(a[1].abs().sum().item<double>(), 0.0);
  // Group 2: mean 1, sample std sqrt(2 / 3) -> (2-1)/0.816497 = 1.224745.
  EXPECT_NEAR(a[2][0].item<double>(), 1.0 / std::sqrt(2.0 / 3.0), 1e-12);
  EXPECT_NEAR(a[2][2].item<double>(), 0.0, 1e-12);
}

TEST(Grpo, LossMatchesHandComputation) {
  // One sequence, three response tokens (the third masked out), advantage +1, clip 0.2.
  // Token 0: ratio e^0.1 = 1.10517 (inside the clip) -> pg = -1.10517.
  // Token 1: ratio e^0.5 = 1.64872 (clipped to 1.2)  -> pg = -min(1.64872, 1.2) = -1.2.
  auto t = [](std::vector<double> v) { return torch::tensor(v, torch::kFloat64).view({1, -1}); };
  torch::Tensor old_lp = t({-1.0, -2.0, -3.0});
  torch::Tensor new_lp = t({-0.9, -1.5, -3.0}).set_requires_grad(true);
  torch::Tensor ref_lp = t({-1.0, -1.5, -3.0});
  torch::Tensor mask = t({1, 1, 0});
  GrpoLoss g =
      grpo_loss(new_lp, old_lp, ref_lp, torch::tensor({1.0}, torch::kFloat64), mask, 0.2, 0.1);
  // KL (k3): token 0 d = -0.1 -> e^-0.1 + 0.1 - 1 = 0.0048374; token 1 d = 0 -> 0.
  double kl0 = std::exp(-0.1) + 0.1 - 1.0;
  double want = (-std::exp(0.1) - 1.2 + 0.1 * kl0) / 2.0;
  EXPECT_NEAR(g.loss.item<double>(), want, 1e-12);
  EXPECT_NEAR(g.clip_fraction, 0.5, 1e-12);
  EXPECT_NEAR(g.kl, kl0 / 2.0, 1e-12);
  // Gradient: the clipped token gives none through pg; token 0 gives -ratio*A/2 plus the KL part.
  g.loss.backward();
  double g0 = (-std::exp(0.1) + 0.1 * (1.0 - std::exp(-0.1))) / 2.0;
  EXPECT_NEAR(new_lp.grad()[0][0].item<double>(), g0, 1e-12);
  EXPECT_NEAR(new_lp.grad()[0][1].item<double>(), 0.0, 1e-12);
  EXPECT_NEAR(new_lp.grad()[0][2].item<double>(), 0.0, 1e-12);
}

TEST(Grpo, NegativeAdvantageClipsBelow) {
  // A = -1, ratio e^-0.5 = 0.6065 < 0.8: -min(-0.6065, -0.8) = 0.8 (the clipped term wins).
  torch::Tensor o = torch::zeros({1, 1}, torch::kFloat64),
                n = torch::full({1, 1}, -0.5, torch::kFloat64);
  GrpoLoss g =
      grpo_loss(n, o, n, torch::tensor({-1.0}, torch::kFloat64), torch::ones({1, 1}), 0.2, 0.0);
  EXPECT_NEAR(g.loss.item<double>(), 0.8, 1e-12);
}

TEST(Grpo, SequenceMeanWeighsEachResponseTheSame) {
  // Two responses, ratio 1 (logp_new = logp_old), no KL: pg_t = -A. Row 0: one token, A = +2;
  // row 1: three tokens, A = -1. Token mean: (-2 + 3 * 1) / 4 = 0.25, so the long failure wins;
  // sequence mean: (-2 + 1) / 2 = -0.5.
  torch::Tensor lp = torch::zeros({2, 3}, torch::kFloat64);
  torch::Tensor mask = torch::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 1.0}, torch::kFloat64).view({2, 3});
  torch::Tensor adv = torch::tensor({2.0, -1.0}, torch::kFloat64);
  EXPECT_NEAR(grpo_loss(lp, lp, lp, adv, mask, 0.2, 0.0).loss.item<double>(), 0.25, 1e-12);
  torch::Tensor new_lp = lp.clone().set_requires_grad(true);
  GrpoLoss g = grpo_loss(new_lp, lp, lp, adv, mask, 0.2, 0.0, LossAggregation::kSequenceMean);
  EXPECT_NEAR(g.loss.item<double>(), -0.5, 1e-12);
  // d loss / d logp_new: -A / (tokens of the row * rows) on response tokens, 0 on padding.
  g.loss.backward();
  EXPECT_NEAR(new_lp.grad()[0][0].item<double>(), -2.0 / 2.0, 1e-12);
  EXPECT_NEAR(new_lp.grad()[0][1].item<double>(), 0.0, 1e-12);
  EXPECT_NEAR(new_lp.grad()[1][2].item<double>(), 1.0 / 6.0, 1e-12);
}

TEST(Grpo, TokenLogprobsGather) {
  torch::Tensor logits = torch::log(torch::tensor({{{0.25, 0.75}, {0.5, 0.5}}}, torch::kFloat64));
  torch::Tensor lp = token_logprobs(logits, torch::tensor({{1L, 0L}}));
  EXPECT_NEAR(lp[0][0].item<double>(), std::log(0.75), 1e-12);
  EXPECT_NEAR(lp[0][1].item<double>(), std::log(0.5), 1e-12);
}

}  // namespace
}  // namespace tlt::rl
