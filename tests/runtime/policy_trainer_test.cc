// The policy update (runtime/rl/policy_trainer.h) on the micro preset: an advantage moves its
// response's log-probability, mixed precision follows float32, micro-batches and shared prompts
// give one padded batch's update up to summation order (bounds in rl_run_test.cc, above
// RlWarmStart.MicroBatchedStepsMatchOnePaddedBatch), cancel points, and save/load.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "runtime/rl/policy_trainer.h"
#include "tests/runtime/rl_fixtures.h"

namespace tlt::rl {
namespace {

using namespace test;

TEST(RlPolicyTrainer, PositiveAdvantageRaisesItsResponseLogProbability) {
  model::Transformer policy = micro_policy(2), reference = micro_policy(2);
  GrpoOptions o;
  o.learning_rate = 3e-3, o.minibatches = 1;
  PolicyTrainer trainer(policy, reference, o);
  SequenceBatch b = make_batch({{10, 11}, {10, 11}}, {{20, 21, 22}, {30, 31, 32}});
  auto logp = [&](int row) {
    torch::NoGradGuard g;
    return (sequence_logprobs(policy, b, 1.0)[row] * b.mask[row]).sum().item<double>();
  };
  double good0 = logp(0), bad0 = logp(1);
  for (int i = 0; i < 5; ++i) trainer.update(b, torch::tensor({1.0f, -1.0f}));
  EXPECT_GT(logp(0), good0 + 0.1);
  EXPECT_LT(logp(1), bad0 - 0.1);
}

// A mixed-precision update (GrpoOptions::bfloat16) moves the weights as the float32 one does, up
// to bfloat16's rounding, and leaves them, their gradients and AdamW's state in float32.
TEST(RlPolicyTrainer, MixedPrecisionUpdateFollowsTheFloat32One) {
  SequenceBatch b = long_tailed_batch(24, 6);
  torch::manual_seed(12);
  torch::Tensor adv = torch::randn({24});  // (B,)
  GrpoOptions o;
  o.learning_rate = 1e-3, o.minibatches = 1, o.kl_coef = 0.1, o.max_tokens_per_microbatch = 160;
  model::Transformer start = micro_policy(5), f32 = micro_policy(5), mixed = micro_policy(5);
  PolicyTrainer full(f32, micro_policy(6), o);
  o.bfloat16 = true;
  PolicyTrainer half(mixed, micro_policy(6), o);
  UpdateStats a = full.update(b, adv), c = half.update(b, adv);
  std::printf("loss %.6f (float32) vs %.6f (bfloat16)\n", a.loss, c.loss);
  EXPECT_NEAR(a.loss, c.loss, 0.05 * std::abs(a.loss) + 1e-3);
  double dot = 0.0, nf = 0.0, nm = 0.0, diff = 0.0;
  auto p0 = start->named_parameters(), pf = f32->named_parameters(), pm = mixed->named_parameters();
  for (const auto& p : p0) {
    ASSERT_EQ(pm[p.key()].scalar_type(), torch::kFloat32) << p.key();
    torch::Tensor df = pf[p.key()] - p.value(), dm = pm[p.key()] - p.value();
    dot += (df * dm).sum().item<double>();
    nf += df.pow(2).sum().item<double>(), nm += dm.pow(2).sum().item<double>();
    diff = std::max(diff, (df - dm).abs().max().item<double>());
  }
  double cosine = dot / std::sqrt(nf * nm);
  std::printf("update direction cosine %.4f, largest difference %.3e\n", cosine, diff);
  EXPECT_GT(nf, 0.0);
  EXPECT_GT(cosine, 0.9) << "the two updates should point the same way";
  EXPECT_GT(diff, 0.0) << "the bfloat16 update should not be bit-identical to float32's";
}

// The micro-batched update against one padded batch per minibatch (max_tokens_per_microbatch 0),
// in float64 so that only summation order separates them: same loss, KL, clip fraction and
// weights after two updates (learning rate 1e-2 moves the ratios past the clip), under either
// loss aggregation (micro-batches are weighted by tokens or by rows).
void expect_micro_batched_update_matches_one_padded_batch(LossAggregation aggregation) {
  model::Transformer padded = micro_policy64(8), micro = micro_policy64(8),
                     reference = micro_policy64(9);
  GrpoOptions o;
  o.learning_rate = 1e-2, o.minibatches = 2, o.kl_coef = 0.1;
  o.aggregation = aggregation;
  o.max_tokens_per_microbatch = 0;
  PolicyTrainer whole(padded, reference, o);
  o.max_tokens_per_microbatch = 160;
  PolicyTrainer split(micro, reference, o);
  SequenceBatch b = long_tailed_batch(24, 5);
  torch::manual_seed(10);
  torch::Tensor adv = torch::randn({24}, torch::kFloat64);  // (B,)
  int64_t t = b.tokens.size(1);
  double clipped = 0.0;
  for (int step = 0; step < 2; ++step) {
    UpdateStats a = whole.update(b, adv), c = split.update(b, adv);
    std::printf(
        "step %d: loss %.12f vs %.12f, kl %.3e vs %.3e, clip %.4f vs %.4f, "
        "micro-batches %lld vs %lld, positions %lld vs %lld\n",
        step, a.loss, c.loss, a.kl, c.kl, a.clip_fraction, c.clip_fraction,
        (long long)a.microbatches, (long long)c.microbatches, (long long)a.positions,
        (long long)c.positions);
    EXPECT_NEAR(a.loss, c.loss, 1e-11);
    EXPECT_NEAR(a.kl, c.kl, 1e-12);
    EXPECT_NEAR(a.clip_fraction, c.clip_fraction, 1e-12);
    EXPECT_EQ(a.microbatches, 2);
    EXPECT_EQ(a.positions, 24 * (t - 1));
    EXPECT_GT(c.microbatches, 4) << "the token budget should cut each minibatch several times";
    EXPECT_LT(c.positions, a.positions / 2) << "micro-batches should skip most of the padding";
    clipped += a.clip_fraction;
  }
  EXPECT_GT(clipped, 0.0) << "the test should exercise the clipped branch";
  double maxdiff = 0.0;
  auto pa = padded->named_parameters(), pc = micro->named_parameters();
  for (const auto& p : pa) {
    torch::Tensor w = p.value(), v = pc[p.key()];
    maxdiff = std::max(maxdiff, (w - v).abs().max().item<double>());
  }
  std::printf("weights after two updates: maxdiff %.3e\n", maxdiff);
  EXPECT_LT(maxdiff, 1e-10);
  // And the update moved the weights well beyond that.
  EXPECT_GT(
      (padded->lm_head->weight - micro_policy64(8)->lm_head->weight).abs().max().item<double>(),
      1e-3);
}

TEST(RlPolicyTrainer, MicroBatchedUpdateMatchesOnePaddedBatch) {
  expect_micro_batched_update_matches_one_padded_batch(LossAggregation::kTokenMean);
}

TEST(RlPolicyTrainer, MicroBatchedSequenceMeanUpdateMatchesOnePaddedBatch) {
  expect_micro_batched_update_matches_one_padded_batch(LossAggregation::kSequenceMean);
}

// GRPO groups whose samples share their prompt's forward and backward (share_prompts) update the
// policy as running every sample's whole sequence does, in float64: same loss, KL, clip fraction
// and weights after two updates, with fewer positions run.
TEST(RlPolicyTrainer, SharedPromptUpdateMatchesTheWholeSequences) {
  model::Transformer whole = micro_policy64(8), shared = micro_policy64(8),
                     reference = micro_policy64(9);
  GrpoOptions o;
  o.learning_rate = 1e-2, o.minibatches = 2, o.kl_coef = 0.1, o.max_tokens_per_microbatch = 400;
  o.share_prompts = false;
  PolicyTrainer a_trainer(whole, reference, o);
  o.share_prompts = true;
  PolicyTrainer c_trainer(shared, reference, o);
  SequenceBatch b = grouped_batch(4, 11);
  torch::manual_seed(12);
  torch::Tensor adv = torch::randn({32}, torch::kFloat64);  // (B,)
  for (int step = 0; step < 2; ++step) {
    UpdateStats a = a_trainer.update(b, adv), c = c_trainer.update(b, adv);
    std::printf(
        "step %d: loss %.12f vs %.12f, kl %.3e vs %.3e, positions %lld vs %lld, micro-batches "
        "%lld vs %lld\n",
        step, a.loss, c.loss, a.kl, c.kl, (long long)a.positions, (long long)c.positions,
        (long long)a.microbatches, (long long)c.microbatches);
    EXPECT_GT(c.microbatches, 4) << "some group should span micro-batches (its prefix run once)";
    EXPECT_NEAR(a.loss, c.loss, 1e-11);
    EXPECT_NEAR(a.kl, c.kl, 1e-12);
    EXPECT_NEAR(a.clip_fraction, c.clip_fraction, 1e-12);
    EXPECT_LT(c.positions, a.positions * 2 / 3) << "the prompts should run once per micro-batch";
  }
  double maxdiff = 0.0;
  auto pa = whole->named_parameters(), pc = shared->named_parameters();
  for (const auto& p : pa)
    maxdiff = std::max(maxdiff, (p.value() - pc[p.key()]).abs().max().item<double>());
  std::printf("weights after two updates: maxdiff %.3e\n", maxdiff);
  EXPECT_LT(maxdiff, 1e-10);
  EXPECT_GT(
      (whole->lm_head->weight - micro_policy64(8)->lm_head->weight).abs().max().item<double>(),
      1e-3);
}

// GrpoOptions::cancelled is asked before every micro-batch: answering true stops the update there
// (no further forward runs); never answering true leaves the update as it was.
TEST(RlPolicyTrainer, CancelledStopsTheUpdateBeforeTheNextMicroBatch) {
  SequenceBatch b = long_tailed_batch(24, 5);
  torch::Tensor adv = torch::randn({24});  // (B,)
  GrpoOptions o;
  o.minibatches = 2, o.max_tokens_per_microbatch = 160;
  int asked = 0;
  o.cancelled = [&asked] { return ++asked > 3; };
  model::Transformer policy = micro_policy(4);
  PolicyTrainer trainer(policy, micro_policy(4), o);
  UpdateStats st = trainer.update(b, adv);
  EXPECT_TRUE(st.cancelled);
  EXPECT_EQ(asked, 4) << "stopped at the first question answered yes";
  EXPECT_EQ(st.microbatches, 0);
  o.cancelled = [&asked] { return ++asked < 0; };
  asked = 0;
  PolicyTrainer full(micro_policy(4), micro_policy(4), o);
  UpdateStats done = full.update(b, adv);
  EXPECT_FALSE(done.cancelled);
  EXPECT_GT(done.microbatches, 4);
  EXPECT_GE(asked, done.microbatches);
}

// A cancel point is asked only before the update's first optimizer step: whichever question is
// answered yes, the update either stops with the policy exactly as before it (the last step's
// checkpoint stays valid) or was past its first optimizer step and ran to the end, as an update
// never cancelled.
TEST(RlPolicyTrainer, CancelLeavesThePolicyUnchangedOrFinishesTheUpdate) {
  SequenceBatch b = long_tailed_batch(24, 5);
  torch::Tensor adv = torch::randn({24});  // (B,)
  GrpoOptions o;
  o.minibatches = 2, o.max_tokens_per_microbatch = 160;
  auto weights = [](model::Transformer& m) {
    std::vector<torch::Tensor> w;
    for (const auto& p : m->parameters()) w.push_back(p.detach().clone());
    return w;
  };
  auto max_change = [](const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& c) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - c[i]).abs().max().item<double>());
    return d;
  };
  model::Transformer whole = micro_policy(4);
  UpdateStats full = PolicyTrainer(whole, micro_policy(4), o).update(b, adv);
  ASSERT_FALSE(full.cancelled);
  model::Transformer fresh = micro_policy(4);
  std::vector<torch::Tensor> initial = weights(fresh);
  int cancelled = 0, finished = 0;
  for (int k = 1; k <= int(full.microbatches) + 8; ++k) {
    SCOPED_TRACE("yes from question " + std::to_string(k));
    int asked = 0;
    o.cancelled = [&asked, k] { return ++asked >= k; };
    model::Transformer policy = micro_policy(4);
    UpdateStats st = PolicyTrainer(policy, micro_policy(4), o).update(b, adv);
    if (st.cancelled) {
      ++cancelled;
      EXPECT_EQ(asked, k) << "asked again after a yes";
      EXPECT_EQ(max_change(weights(policy), initial), 0.0) << "a cancelled update moved the policy";
    } else {
      ++finished;
      EXPECT_EQ(st.microbatches, full.microbatches);
      EXPECT_LT(max_change(weights(policy), weights(whole)), 1e-6);
    }
  }
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(finished, 0) << "no question came after the first optimizer step's cancel points";
}

TEST(RlPolicyTrainer, SaveLoadRestoresWeightsAndRefusesCorruption) {
  model::Transformer policy = micro_policy(3), reference = micro_policy(3);
  PolicyTrainer trainer(policy, reference, GrpoOptions{});
  std::string dir = ::testing::TempDir() + "/rl_trainer_ckpt";
  ASSERT_TRUE(trainer.save(dir, "meta").ok());
  model::Transformer other = micro_policy(4);
  PolicyTrainer loader(other, reference, GrpoOptions{});
  ASSERT_TRUE(loader.load(dir).ok());
  EXPECT_TRUE(torch::equal(other->lm_head->weight, policy->lm_head->weight));
  // Flip one payload byte: the load is refused and the weights stay as they were.
  std::string path = dir + "/policy.ckpt";
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  off_t end = ::lseek(fd, 0, SEEK_END);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, end - 10), 1);
  c ^= 0x40;
  ASSERT_EQ(::pwrite(fd, &c, 1, end - 10), 1);
  ::close(fd);
  model::Transformer fresh = micro_policy(5);
  torch::Tensor before = fresh->lm_head->weight.clone();
  PolicyTrainer third(fresh, reference, GrpoOptions{});
  StatusOr<std::string> st = third.load(dir);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kCorruption) << st.status().message();
  EXPECT_TRUE(torch::equal(fresh->lm_head->weight, before));
}

}  // namespace
}  // namespace tlt::rl
