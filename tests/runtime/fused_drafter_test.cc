// The EAGLE-3-style fused drafter (spec.drafter.features: fused): the target's fused feature
// export, the drafter's two input paths, its training without hidden-state regression, its
// checkpoints, and losslessness as the rollout engine's tests check it for the `last` drafter
// (tests/runtime/rollout_test.cc): greedy output equals plain output token for token, sampled
// output passes a two-sample chi-square test against plain sampling, and a broken acceptance rule
// is caught by the same test.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "runtime/drafter/trainer.h"
#include "runtime/model/checkpoint.h"
#include "runtime/rollout/engine.h"
#include "tests/runtime/engine_checks.h"
#include "tests/runtime/requests.h"

namespace tlt::rollout {
namespace {

using model::Drafter;
using model::DrafterFeatures;
using model::ModelConfig;
using model::Transformer;
using test_support::expect_same_tokens;
using test_support::gamma_q;
using test_support::homogeneity_p;
using test_support::plain_options;
using test_support::run;
using test_support::spec_options;

// Six layers, so the low (1), middle (2) and final features are three different layers.
ModelConfig fused_config(int64_t vocab) {
  ModelConfig c;
  c.vocab = vocab, c.dim = 32, c.n_layers = 6, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 64;
  c.max_seq = 128;
  return c;
}

Transformer make_target(int64_t vocab, uint64_t seed, double head_scale) {
  return test_support::peaked_target(fused_config(vocab), seed, head_scale);
}

torch::Tensor positions_from_zero(int64_t b, int64_t t) {
  return model::sequential_positions(torch::zeros({b}, torch::kInt64), t);
}

// Trains `drafter` on the target's greedy continuations of `reqs` (`levels` unrolled levels),
// reading the features the target exports (fused when a fused drafter asked for them).
void train_drafter(Transformer target, Drafter drafter, const std::vector<Request>& reqs, int steps,
                   int64_t levels) {
  std::vector<Completion> outs = run(target, Drafter(nullptr), plain_options(32), reqs);
  drafter::DrafterTrainer trainer(drafter, target, 3e-3, levels);
  std::mt19937_64 rng(1);
  for (int s = 0; s < steps; ++s) {
    const Request& r = reqs[rng() % reqs.size()];
    std::vector<int64_t> seq = r.prompt;
    seq.insert(seq.end(), outs[r.id].tokens.begin(), outs[r.id].tokens.end());
    int64_t t = int64_t(seq.size());
    torch::Tensor toks = torch::tensor(seq, torch::kInt64).view({1, t});
    torch::Tensor feats;
    {
      torch::NoGradGuard g;
      feats = target->forward(toks, positions_from_zero(1, t)).drafter_features();
    }
    trainer.step(toks, feats, torch::ones({1, t}));
  }
  drafter->eval();
}

// ---- the export and the drafter's inputs ----------------------------------------------------

TEST(FusedFeatures, ExportIsOffByDefaultAndChangesNothingWhenOn) {
  Transformer t = make_target(40, 1, 4.0);
  torch::Tensor toks = torch::randint(40, {2, 7}, torch::kInt64), pos = positions_from_zero(2, 7);
  model::ForwardResult plain = t->forward(toks, pos);
  EXPECT_FALSE(plain.features.defined());
  EXPECT_EQ(t->feature_width(), 32);
  t->set_export_features(true);
  model::ForwardResult fused = t->forward(toks, pos);
  ASSERT_TRUE(fused.features.defined());
  EXPECT_EQ(fused.features.sizes(), (std::vector<int64_t>{2, 7, 96}));
  EXPECT_EQ(t->feature_width(), 96);
  EXPECT_TRUE(torch::equal(fused.logits, plain.logits));
  EXPECT_TRUE(torch::equal(fused.hidden, plain.hidden));
  EXPECT_TRUE(torch::equal(fused.features.narrow(-1, 64, 32), fused.hidden));
  EXPECT_EQ(t->feature_layers(), (std::vector<int64_t>{1, 2}));
  // The low feature is layer 1's output: the first two layers run by hand.
  torch::Tensor h = t->embed(toks);
  torch::nn::ModuleList two;
  two->push_back(t->layers[0]), two->push_back(t->layers[1]);
  torch::Tensor low = t->run_layers(two, h, pos, nullptr, {});
  EXPECT_TRUE(torch::allclose(fused.features.narrow(-1, 0, 32), low, 1e-12, 1e-12));
}

TEST(FusedFeatures, UntrainedFusedDrafterEqualsTheLastOneAndReadsItsOwnOutputs) {
  Transformer t = make_target(40, 2, 4.0);
  Drafter last(t, 1), fused(t, 1, DrafterFeatures::kFused);
  EXPECT_TRUE(t->export_features()) << "a fused drafter asks its target for the features";
  {
    torch::NoGradGuard g;  // the same fc and layers in both; fuse as initialised
    auto mine = fused->named_parameters();
    for (const auto& p : last->named_parameters()) mine[p.key()].copy_(p.value());
  }
  torch::Tensor toks = torch::randint(40, {2, 5}, torch::kInt64), pos = positions_from_zero(2, 5);
  torch::Tensor feats = t->forward(toks, pos).features;  // (2, 5, 96)
  torch::NoGradGuard g;
  // fuse starts as [0 | 0 | I]: both read the final hidden state.
  torch::Tensor a = last->forward(toks, feats, pos), b = fused->forward(toks, feats, pos);
  EXPECT_TRUE(torch::allclose(a, b, 1e-10, 1e-10));
  // The `last` drafter reads a fused feature's final columns exactly as the hidden state.
  EXPECT_TRUE(torch::equal(a, last->forward(toks, feats.narrow(-1, 64, 32), pos)));
  // A C-wide input (the drafter's own prediction) takes the identity path in both.
  torch::Tensor own = torch::randn({2, 5, 32}, torch::kFloat64);
  EXPECT_TRUE(
      torch::allclose(last->forward(toks, own, pos), fused->forward(toks, own, pos), 1e-10, 1e-10));
  EXPECT_THROW(fused->forward(toks, torch::zeros({2, 5, 64}, torch::kFloat64), pos), c10::Error);
}

TEST(FusedFeatures, CheckpointsRecordTheFeatureMode) {
  Transformer t = make_target(40, 4, 4.0);
  Drafter last(t, 1), fused(t, 1, DrafterFeatures::kFused);
  std::string dir = testing::TempDir() + "/fused_ckpt";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(model::save_checkpoint(*last, dir + "/last.ckpt", "last").ok());
  ASSERT_TRUE(model::save_checkpoint(*fused, dir + "/fused.ckpt", "fused").ok());
  EXPECT_TRUE(model::load_drafter_checkpoint(last, dir + "/last.ckpt").ok());
  EXPECT_TRUE(model::load_drafter_checkpoint(fused, dir + "/fused.ckpt").ok());
  StatusOr<std::string> wrong = model::load_drafter_checkpoint(fused, dir + "/last.ckpt");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("features=last"), std::string::npos)
      << wrong.status().to_string();
  EXPECT_NE(wrong.status().message().find("spec.drafter.features"), std::string::npos);
  EXPECT_FALSE(model::load_drafter_checkpoint(last, dir + "/fused.ckpt").ok());
  EXPECT_EQ(*model::parse_drafter_features("fused"), DrafterFeatures::kFused);
  EXPECT_FALSE(model::parse_drafter_features("middle").ok());
}

// ---- training-time test ---------------------------------------------------------------------

TEST(FusedTraining, LossIsTheTokensCrossEntropyAloneAndFallsThroughTheLevels) {
  Transformer t = make_target(40, 5, 8.0);
  torch::manual_seed(6);
  Drafter fused(t, 1, DrafterFeatures::kFused);
  EXPECT_FALSE(drafter::default_regression(fused));
  EXPECT_TRUE(drafter::default_regression(Drafter(t, 1)));
  torch::Tensor toks = torch::randint(40, {4, 12}, torch::kInt64);
  torch::Tensor feats = t->forward(toks, positions_from_zero(4, 12)).features.detach();
  torch::Tensor mask = torch::ones({4, 12});
  double ce = drafter::drafter_loss(fused, toks, feats, mask, 3, nullptr).item<double>();
  double both = drafter::drafter_loss(fused, toks, feats, mask, 3, nullptr, true).item<double>();
  EXPECT_GT(both, 0.5 * ce) << "regression adds a term of its own";
  EXPECT_NE(ce, both);
  // Gradients reach fuse (level 1) and, through the levels, the drafter's own outputs.
  drafter::DrafterTrainer trainer(fused, t, 3e-3, 3);
  double first = trainer.step(toks, feats, mask), last = first;
  for (int s = 0; s < 60; ++s) last = trainer.step(toks, feats, mask);
  EXPECT_LT(last, 0.9 * first) << "first " << first << " last " << last;
  EXPECT_GT(fused->fuse->weight.narrow(1, 0, 32).abs().sum().item<double>(), 0.0)
      << "the low layer's block must have learnt";
}

// ---- losslessness ---------------------------------------------------------------------------

class FusedGreedyExactness : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = new Transformer(make_target(64, 11, 30.0));
    torch::manual_seed(12);
    drafter_ = new Drafter(*target_, 1, DrafterFeatures::kFused);
    reqs_ = new std::vector<Request>(test_support::random_requests(120, 64, 24, 0.0, 3));
    train_drafter(*target_, *drafter_, *reqs_, 200, 3);
    plain_ =
        new std::vector<Completion>(run(*target_, Drafter(nullptr), plain_options(32), *reqs_));
  }
  static void TearDownTestSuite() {
    delete target_;
    delete drafter_;
    delete reqs_;
    delete plain_;
  }
  static Transformer* target_;
  static Drafter* drafter_;
  static std::vector<Request>* reqs_;
  static std::vector<Completion>* plain_;
};
Transformer* FusedGreedyExactness::target_ = nullptr;
Drafter* FusedGreedyExactness::drafter_ = nullptr;
std::vector<Request>* FusedGreedyExactness::reqs_ = nullptr;
std::vector<Completion>* FusedGreedyExactness::plain_ = nullptr;

TEST_F(FusedGreedyExactness, ChainsTreesAndBanditEqualPlainDecoding) {
  EngineStats st;
  for (int64_t batch : {1, 16}) {
    auto chain = run(*target_, *drafter_, spec_options(batch, {"6_1_7"}), *reqs_, &st);
    expect_same_tokens(chain, *plain_, "fused chain batch " + std::to_string(batch));
    EXPECT_GT(st.accept_length(), 1.5) << "a trained fused drafter should get tokens accepted";
    auto tree = run(*target_, *drafter_, spec_options(batch, {"4_2_8"}), *reqs_, &st);
    expect_same_tokens(tree, *plain_, "fused tree batch " + std::to_string(batch));
  }
  auto bandit =
      run(*target_, *drafter_, spec_options(32, {"4_1_5", "6_2_12", "ngram"}), *reqs_, &st);
  expect_same_tokens(bandit, *plain_, "fused drafter under the bandit");
}

TEST_F(FusedGreedyExactness, LastDrafterReadsFusedFeaturesAsItsHiddenStates) {
  // The target exports fused features (the suite's fused drafter asked): a `last` drafter in the
  // same engine reads their final columns, so it drafts exactly what it drafts without them.
  torch::manual_seed(13);
  Drafter last(*target_, 1);
  train_drafter(*target_, last, *reqs_, 100, 1);
  EngineStats with, without;
  auto a = run(*target_, last, spec_options(8, {"4_1_5"}), *reqs_, &with);
  (*target_)->set_export_features(false);
  auto b = run(*target_, last, spec_options(8, {"4_1_5"}), *reqs_, &without);
  (*target_)->set_export_features(true);
  expect_same_tokens(a, *plain_, "last drafter on fused features");
  expect_same_tokens(b, *plain_, "last drafter on hidden states");
  EXPECT_EQ(with.accepted, without.accepted);
  EXPECT_EQ(with.drafted, without.drafted);
}

class FusedSamplingDistribution : public ::testing::Test {
 protected:
  static constexpr int kN = 3000;
  static void SetUpTestSuite() {
    target_ = new Transformer(make_target(16, 21, 8.0));
    torch::manual_seed(22);
    drafter_ = new Drafter(*target_, 1, DrafterFeatures::kFused);
    reqs_ = new std::vector<Request>();
    for (int i = 0; i < kN; ++i) {  // the same prompt, each request with its own seed
      Request r;
      r.id = i;
      r.prompt = {3, 1, 4, 1, 5};
      r.max_new_tokens = 4;
      r.sampling.temperature = 1.0;
      r.seed = 100000 + i;
      reqs_->push_back(r);
    }
    train_drafter(*target_, *drafter_, test_support::random_requests(64, 16, 24, 0.0, 5), 150, 3);
    plain_ =
        new std::vector<Completion>(run(*target_, Drafter(nullptr), plain_options(64), *reqs_));
  }
  static void TearDownTestSuite() {
    delete target_;
    delete drafter_;
    delete reqs_;
    delete plain_;
  }
  static Transformer* target_;
  static Drafter* drafter_;
  static std::vector<Request>* reqs_;
  static std::vector<Completion>* plain_;
};
Transformer* FusedSamplingDistribution::target_ = nullptr;
Drafter* FusedSamplingDistribution::drafter_ = nullptr;
std::vector<Request>* FusedSamplingDistribution::reqs_ = nullptr;
std::vector<Completion>* FusedSamplingDistribution::plain_ = nullptr;

TEST_F(FusedSamplingDistribution, RejectionChainAndTreeMatchPlain) {
  for (const char* arm : {"3_1_4", "3_3_8"}) {
    EngineStats st;
    auto spec = run(*target_, *drafter_, spec_options(64, {arm}), *reqs_, &st);
    EXPECT_GT(st.accepted, kN / 10) << arm << ": drafts must get accepted to mean anything";
    for (size_t pos : {1, 2, 3}) {
      double p = homogeneity_p(*plain_, spec, pos);
      std::printf("fused %s: token %zu p=%.4f (accept length %.2f)\n", arm, pos, p,
                  st.accept_length());
      EXPECT_GT(p, 1e-3) << arm << " token " << pos;
    }
  }
}

TEST_F(FusedSamplingDistribution, BrokenAcceptanceRuleIsCaught) {
  EngineOptions o = spec_options(64, {"3_1_4"});
  // Wrong: accepts every drafted token, so outputs follow the fused drafter, not the target.
  o.chain_rule = [](const DraftTree& chain, const NodeLogits& logits,
                    const std::vector<std::vector<double>>&, const SamplingParams& params,
                    Rng& rng) {
    Verdict v;
    for (int32_t k = 0; k < chain.size(); ++k) v.path.push_back(k);
    v.next_token = sample(sampling_probs(logits.row(chain.size() - 1), logits.vocab, params), rng);
    return v;
  };
  // A fused drafter whose fuse mixes all three layers at random: far from the target.
  torch::manual_seed(24);
  Drafter random(*target_, 1, DrafterFeatures::kFused);
  {
    torch::NoGradGuard g;
    random->fuse->weight.normal_(0.0, 0.3);
  }
  random->eval();
  auto broken = run(*target_, random, o, *reqs_);
  double worst = 1.0;
  for (size_t pos : {1, 2}) worst = std::min(worst, homogeneity_p(*plain_, broken, pos));
  std::printf("fused, broken rule: smallest p=%.3g\n", worst);
  EXPECT_LT(worst, 1e-6) << "the test must notice a lossy rule";
}

}  // namespace
}  // namespace tlt::rollout
