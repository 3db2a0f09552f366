// Token Superposition Training: bags, labels and multi-hot CE on hand-made sequences against
// direct computations; s = 1 is exactly next-token training; equal FLOPs per step in both
// phases and the baseline; documents never mixed in a bag; resume continues identically.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/tst/flops.h"
#include "runtime/tst/schedule.h"
#include "runtime/tst/stream.h"
#include "runtime/tst/superposition.h"
#include "runtime/tst/trainer.h"

namespace tlt::tst {
namespace {

model::ModelConfig cfg() {
  model::ModelConfig c;
  c.vocab = 50, c.dim = 16, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.ffn = 32;
  c.max_seq = 64;
  return c;
}

TEST(Superposition, BagEmbeddingIsMeanOfEmbeddings) {
  torch::manual_seed(0);
  torch::nn::Embedding e(50, 8);
  torch::Tensor toks = torch::tensor({{1L, 2L, 3L, 4L, 5L, 6L}});
  torch::Tensor got = bag_embeddings(e, toks, 3);  // (1, 2, 8)
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{1, 2, 8}));
  torch::Tensor w = e->weight;
  torch::Tensor want0 = (w[1] + w[2] + w[3]) / 3, want1 = (w[4] + w[5] + w[6]) / 3;
  double d = std::max((got[0][0] - want0).abs().max().item<double>(),
                      (got[0][1] - want1).abs().max().item<double>());
  EXPECT_LT(d, 1e-6) << "maxdiff=" << d;
}

TEST(Superposition, LabelsAreNextBagShiftedBySMinusOne) {
  torch::Tensor toks = torch::tensor({{10L, 11L, 12L, 13L, 14L, 15L, 16L, 17L, 18L}});
  torch::Tensor l = bag_labels(toks, 3);  // bags [10..12] [13..15] [16..18]
  torch::Tensor want =
      torch::tensor({{{13L, 14L, 15L}, {16L, 17L, 18L}, {kIgnore, kIgnore, kIgnore}}});
  EXPECT_TRUE(torch::equal(l, want)) << l;
  // s = 1: plain next-token labels.
  torch::Tensor l1 = bag_labels(toks.narrow(1, 0, 4), 1);
  EXPECT_TRUE(torch::equal(l1.squeeze(-1), torch::tensor({{11L, 12L, 13L, kIgnore}})));
}

TEST(Superposition, MultiHotCeIsMeanOfTheSCrossEntropies) {
  torch::manual_seed(1);
  torch::Tensor logits = torch::randn({2, 3, 7}, torch::kFloat64);
  torch::Tensor labels = torch::randint(0, 7, {2, 3, 4});
  labels[1][2].fill_(kIgnore);
  labels[0][1][3] = labels[0][1][0];  // a repeated token counts twice
  torch::Tensor got = multi_hot_ce(logits, labels, bag_weights(4, "uniform", torch::kFloat64));
  double sum = 0;
  int n = 0;
  for (int b = 0; b < 2; ++b) {
    for (int l = 0; l < 3; ++l) {
      if (labels[b][l][0].item<int64_t>() == kIgnore) continue;
      double pos = 0;
      for (int j = 0; j < 4; ++j) {
        pos += torch::nn::functional::cross_entropy(logits[b][l].unsqueeze(0),
                                                    labels[b][l][j].unsqueeze(0))
                   .item<double>();
      }
      sum += pos / 4, ++n;
    }
  }
  double d = std::abs(got.item<double>() - sum / n);
  EXPECT_LT(d, 1e-12) << "maxdiff=" << d;
}

TEST(Superposition, PowerLawWeightsFavourNearTokens) {
  torch::Tensor w = bag_weights(4, "power-law", torch::kFloat64);
  EXPECT_NEAR(w.sum().item<double>(), 1.0, 1e-12);
  EXPECT_GT(w[0].item<double>(), w[3].item<double>());
  EXPECT_NEAR(w[0].item<double>() / w[1].item<double>(), 2.0, 1e-12);
}

TEST(Superposition, BagSizeOneIsExactlyNextTokenLoss) {
  torch::manual_seed(2);
  model::Transformer m(cfg());
  m->to(torch::kFloat64);
  torch::Tensor rows = torch::randint(0, 50, {3, 10});
  torch::Tensor x = bag_embeddings(m->embed, rows, 1);
  torch::Tensor pos = torch::arange(10).view({1, 10}).expand({3, 10});
  torch::Tensor mce = multi_hot_ce(m->forward_embeddings(x, pos).logits, bag_labels(rows, 1),
                                   bag_weights(1, "uniform", torch::kFloat64));
  torch::Tensor logits = m->forward(rows, pos).logits.narrow(1, 0, 9).reshape({-1, 50});
  torch::Tensor ntp =
      torch::nn::functional::cross_entropy(logits, rows.narrow(1, 1, 9).reshape({-1}));
  double d = std::abs(mce.item<double>() - ntp.item<double>());
  EXPECT_LT(d, 1e-12) << "maxdiff=" << d;
}

TEST(Schedule, WarmupStableDecayAndPhases) {
  Schedule s;
  s.steps = 100, s.warmup = 10, s.decay_fraction = 0.2, s.peak_lr = 1.0, s.ratio = 0.3, s.bag = 4;
  EXPECT_NEAR(s.lr(0), 0.1, 1e-12);
  EXPECT_NEAR(s.lr(9), 1.0, 1e-12);
  EXPECT_NEAR(s.lr(50), 1.0, 1e-12);
  EXPECT_NEAR(s.lr(90), 0.5, 1e-12);
  EXPECT_EQ(s.switch_step(), 30);
  EXPECT_EQ(s.phase_at(29), "superposition");
  EXPECT_EQ(s.bag_at(29), 4);
  EXPECT_EQ(s.phase_at(30), "recovery");
  EXPECT_EQ(s.bag_at(30), 1);
  s.superposition = false;
  EXPECT_EQ(s.phase_at(0), "baseline");
  EXPECT_EQ(s.bag_at(0), 1);
}

std::vector<std::vector<int32_t>> docs_with_ids(int n_docs, int len) {
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < n_docs; ++d) {
    std::vector<int32_t> doc;
    for (int i = 0; i < len + d % 5; ++i) doc.push_back(2 + d);  // every token names its doc
    doc.push_back(1);                                            // end of document
    docs.push_back(doc);
  }
  return docs;
}

TEST(Stream, BagsNeverMixDocuments) {
  PackedStream st(docs_with_ids(9, 13), 3);
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<int64_t> rows = st.next(4, 24, 6);
    ASSERT_EQ(rows.size(), 96u);
    for (size_t b = 0; b < rows.size(); b += 6) {
      std::set<int64_t> docs;
      for (size_t j = 0; j < 6; ++j) {
        if (rows[b + j] != 1) docs.insert(rows[b + j]);
      }
      EXPECT_LE(docs.size(), 1u) << "bag at " << b << " mixes documents";
    }
  }
  EXPECT_GT(st.epoch(), 0) << "the test should wrap around epochs";
}

class TrainerTest : public ::testing::Test {
 protected:
  TrainerOptions opts(bool superposition) {
    TrainerOptions o;
    o.schedule.steps = 12, o.schedule.warmup = 2, o.schedule.decay_fraction = 0.25;
    o.schedule.peak_lr = 3e-3, o.schedule.superposition = superposition;
    o.schedule.ratio = 0.5, o.schedule.bag = 3;
    o.batch = 4, o.positions = 12, o.eval_batches = 2;
    return o;
  }
  std::vector<std::vector<int32_t>> docs() {
    std::vector<std::vector<int32_t>> d;
    std::mt19937 rng(4);
    for (int i = 0; i < 30; ++i) {
      std::vector<int32_t> doc;
      for (int j = 0; j < 40; ++j) doc.push_back(2 + int32_t((j * 7 + i) % 40 + rng() % 3));
      doc.push_back(1);
      d.push_back(doc);
    }
    return d;
  }
  TSTTrainer make(bool superposition, uint64_t seed = 5) {
    torch::manual_seed(seed);
    return TSTTrainer(model::Transformer(cfg()), PackedStream(docs(), 1), PackedStream(docs(), 2),
                      opts(superposition));
  }
};

TEST_F(TrainerTest, EqualFlopsPerStepInBothPhasesAndBaseline) {
  TSTTrainer tst = make(true), base = make(false);
  double prev_tst = 0, prev_base = 0;
  std::set<std::string> phases;
  std::vector<double> per_step;
  while (!tst.finished()) {
    StepResult a = tst.step(), b = base.step();
    phases.insert(a.phase);
    per_step.push_back(a.flops - prev_tst);
    EXPECT_DOUBLE_EQ(a.flops - prev_tst, b.flops - prev_base) << "step " << a.step;
    prev_tst = a.flops, prev_base = b.flops;
  }
  EXPECT_EQ(phases, (std::set<std::string>{"superposition", "recovery"}));
  for (double f : per_step) EXPECT_DOUBLE_EQ(f, per_step[0]);
  EXPECT_DOUBLE_EQ(per_step[0], train_step_flops(cfg(), 4, 12));
}

TEST_F(TrainerTest, SuperpositionReadsSTimesMoreText) {
  TSTTrainer tst = make(true), base = make(false);
  StepResult a = tst.step(), b = base.step();
  EXPECT_EQ(a.tokens_seen, 3 * b.tokens_seen);
  EXPECT_EQ(b.tokens_seen, 4 * 12);
}

TEST_F(TrainerTest, LossFallsAndHeldOutIsNextToken) {
  TSTTrainer t = make(true);
  double before = t.evaluate();
  while (!t.finished()) t.step();
  double after = t.evaluate();
  EXPECT_LT(after, before) << "held-out next-token loss should fall";
}

// Mixed precision (TrainerOptions::bfloat16, spec.model.dtype): the same run's losses follow
// float32's to bfloat16's rounding in both phases, and the held-out loss still falls.
TEST_F(TrainerTest, MixedPrecisionFollowsFloat32) {
  TSTTrainer f32 = make(true);
  torch::manual_seed(5);
  TrainerOptions o = opts(true);
  o.bfloat16 = true;
  TSTTrainer bf16(model::Transformer(cfg()), PackedStream(docs(), 1), PackedStream(docs(), 2), o);
  double before = bf16.evaluate(), worst = 0.0, differs = 0.0;
  while (!f32.finished()) {
    StepResult a = f32.step(), b = bf16.step();
    ASSERT_EQ(a.phase, b.phase);
    worst = std::max(worst, std::abs(a.loss - b.loss) / a.loss);
    differs += a.loss != b.loss;
  }
  std::printf("largest relative loss difference %.4f\n", worst);
  EXPECT_LT(worst, 0.05);
  EXPECT_GT(differs, 0) << "bfloat16 products should round differently from float32 ones";
  EXPECT_LT(bf16.evaluate(), before);
}

TEST_F(TrainerTest, ResumeContinuesIdentically) {
  std::string dir = (std::filesystem::temp_directory_path() / "tlt_tst_resume").string();
  std::filesystem::remove_all(dir);
  TSTTrainer a = make(true);
  for (int i = 0; i < 5; ++i) a.step();
  ASSERT_TRUE(a.save(dir).ok());
  std::vector<double> a_losses;
  for (int i = 0; i < 4; ++i) a_losses.push_back(a.step().loss);
  TSTTrainer b = make(true, /*seed=*/99);  // other init: everything must come from the checkpoint
  ASSERT_TRUE(b.load(dir).ok());
  EXPECT_EQ(b.steps_done(), 5);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(b.step().loss, a_losses[i]) << "step " << 5 + i;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tlt::tst
