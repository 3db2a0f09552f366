// Model shapes, KV-cache equivalence (incremental == full forward), tree masks, rollback.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "runtime/drafter/trainer.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/config.h"
#include "runtime/model/drafter.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/precision.h"
#include "runtime/model/transformer.h"

namespace tlt::model {
namespace {

ModelConfig test_config() {
  ModelConfig c;
  c.vocab = 97, c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 48;
  c.max_seq = 64;
  return c;
}

Transformer make_model(uint64_t seed = 1) {
  torch::manual_seed(seed);
  Transformer m(test_config());
  m->to(torch::kFloat64);  // float64: compare cached and full forwards to 1e-10
  m->eval();
  return m;
}

double maxdiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

torch::Tensor positions_from(int64_t start, int64_t t, int64_t b = 1) {
  return sequential_positions(torch::full({b}, start, torch::kInt64), t);
}

// The mixed-precision guard: products in bfloat16 while it lives (nested guards too), float32
// again after; a disabled guard changes nothing; spec.model.dtype's auto picks bfloat16 only for
// a real model on hardware with native bfloat16.
TEST(Precision, GuardRunsProductsInBfloat16AndRestores) {
  torch::Tensor a = torch::randn({4, 8}), b = torch::randn({8, 3});  // (4, 8), (8, 3)
  EXPECT_FALSE(model::autocast_active(torch::kCPU));
  {
    model::Bfloat16Autocast off(torch::kCPU, false);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
  }
  {
    model::Bfloat16Autocast on(torch::kCPU, true);
    EXPECT_TRUE(model::autocast_active(torch::kCPU));
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    EXPECT_EQ((a + 1).scalar_type(), torch::kFloat32) << "elementwise ops keep their dtype";
    {
      model::Bfloat16Autocast inner(torch::kCPU, true);
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    }
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16) << "the outer guard still holds";
  }
  EXPECT_FALSE(model::autocast_active(torch::kCPU));
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
  EXPECT_TRUE(model::use_bfloat16("bfloat16", false, torch::kCPU));
  EXPECT_FALSE(model::use_bfloat16("float32", true, torch::kCPU));
  EXPECT_FALSE(model::use_bfloat16("auto", false, torch::kCPU)) << "presets keep float32";
  EXPECT_EQ(model::use_bfloat16("auto", true, torch::kCPU), model::native_bfloat16(torch::kCPU));
}

TEST(ModelConfig, PresetsHaveTheAdvertisedSize) {
  auto tiny = preset_config("tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_GT(tiny->parameter_count(), 2'000'000);
  EXPECT_LT(tiny->parameter_count(), 5'000'000);
  auto small = preset_config("small");
  ASSERT_TRUE(small.ok());
  EXPECT_GT(small->parameter_count(), 20'000'000);
  EXPECT_LT(small->parameter_count(), 40'000'000);
  EXPECT_EQ(preset_config("huge").status().code(), StatusCode::kNotFound);
  ModelConfig bad = test_config();
  bad.n_kv_heads = 3;
  EXPECT_NE(bad.validate().message().find("n_kv_heads"), std::string::npos);
}

TEST(ModelConfig, ParameterCountMatchesModule) {
  Transformer m(test_config());
  int64_t n = 0;
  for (const auto& p : m->parameters()) n += p.numel();
  EXPECT_EQ(n, test_config().parameter_count());
}

TEST(Transformer, ShapesOfLogitsAndHidden) {
  Transformer m = make_model();
  torch::Tensor tokens = torch::randint(0, 97, {3, 5});
  ForwardResult r = m->forward(tokens, positions_from(0, 5, 3));
  EXPECT_EQ(r.logits.sizes(), (std::vector<int64_t>{3, 5, 97}));
  EXPECT_EQ(r.hidden.sizes(), (std::vector<int64_t>{3, 5, 32}));
}

TEST(Transformer, IsCausal) {
  Transformer m = make_model();
  torch::Tensor a = torch::randint(0, 97, {1, 8});
  torch::Tensor b = a.clone();
  b[0][6] = (a[0][6].item<int64_t>() + 1) % 97;
  ForwardResult ra = m->forward(a, positions_from(0, 8)), rb = m->forward(b, positions_from(0, 8));
  EXPECT_LT(maxdiff(ra.logits.narrow(1, 0, 6), rb.logits.narrow(1, 0, 6)), 1e-12);
  EXPECT_GT(maxdiff(ra.logits.narrow(1, 6, 2), rb.logits.narrow(1, 6, 2)), 1e-6);
}

TEST(KVCache, IncrementalDecodingEqualsFullForward) {
  Transformer m = make_model();
  torch::Tensor seq = torch::randint(0, 97, {2, 12});
  ForwardResult full = m->forward(seq, positions_from(0, 12, 2));
  auto cache = m->make_cache(4, 64);
  cache->add_slot();
  cache->add_slot();
  // Prefill 5, then one token at a time.
  ForwardResult pre = m->forward(seq.narrow(1, 0, 5), positions_from(0, 5, 2), cache.get());
  cache->commit_prefix(0, 5);
  cache->commit_prefix(1, 5);
  double worst = maxdiff(pre.logits, full.logits.narrow(1, 0, 5));
  for (int64_t t = 5; t < 12; ++t) {
    ForwardResult step = m->forward(seq.narrow(1, t, 1), positions_from(t, 1, 2), cache.get());
    cache->commit_prefix(0, 1);
    cache->commit_prefix(1, 1);
    worst = std::max(worst, maxdiff(step.logits, full.logits.narrow(1, t, 1)));
    worst = std::max(worst, maxdiff(step.hidden, full.hidden.narrow(1, t, 1)));
  }
  EXPECT_LT(worst, 1e-10) << "maxdiff=" << worst;
}

TEST(KVCache, RaggedLengthsInOneBatch) {
  Transformer m = make_model();
  torch::Tensor a = torch::randint(0, 97, {1, 9}), b = torch::randint(0, 97, {1, 6});
  ForwardResult fa = m->forward(a, positions_from(0, 9)), fb = m->forward(b, positions_from(0, 6));
  auto cache = m->make_cache(2, 64);
  cache->add_slot();
  m->forward(a.narrow(1, 0, 8), positions_from(0, 8), cache.get());
  cache->commit_prefix(0, 8);
  cache->add_slot();  // slot 1 joins later with a shorter prompt (batch of one for its prefill)
  {
    // Prefill slot 1 alone by a batch view: build a separate cache is not needed; run both with
    // slot 0 padded by a throwaway token it will not commit.
    torch::Tensor toks = torch::cat({torch::zeros({1, 5}, torch::kInt64), b.narrow(1, 0, 5)});
    torch::Tensor pos = torch::cat({positions_from(8, 5), positions_from(0, 5)});
    m->forward(toks, pos, cache.get());
    cache->commit_prefix(1, 5);
  }
  torch::Tensor next = torch::cat({a.narrow(1, 8, 1), b.narrow(1, 5, 1)});
  torch::Tensor pos =
      torch::stack({torch::full({1}, 8, torch::kInt64), torch::full({1}, 5, torch::kInt64)});
  ForwardResult r = m->forward(next, pos, cache.get());
  double d =
      std::max(maxdiff(r.logits[0][0], fa.logits[0][8]), maxdiff(r.logits[1][0], fb.logits[0][5]));
  EXPECT_LT(d, 1e-10) << "maxdiff=" << d;
}

TEST(KVCache, PaddedRowsSkipTheMatmulsAndChangeNothingElse) {
  // A verify forward of two requests, the second padded from 2 to 5 tokens: with layout.rows the
  // real tokens' logits and hidden states equal the unpadded forward's, padding logits are 0.
  Transformer m = make_model();
  torch::Tensor a = torch::randint(0, 97, {1, 12}), b = torch::randint(0, 97, {1, 9});
  ForwardResult fa = m->forward(a, positions_from(0, 12)), fb = m->forward(b, positions_from(0, 9));
  auto cache = m->make_cache(2, 64);
  cache->add_slot();
  cache->add_slot();
  torch::Tensor prefix = torch::cat({a.narrow(1, 0, 7), b.narrow(1, 0, 7)});
  m->forward(prefix, positions_from(0, 7, 2), cache.get());
  cache->commit_prefix(0, 7);
  cache->commit_prefix(1, 7);
  torch::Tensor toks = torch::cat(
      {a.narrow(1, 7, 5),
       torch::cat({b.narrow(1, 7, 2), torch::zeros({1, 3}, torch::kInt64)}, 1)});  // (2, 5)
  torch::Tensor pos = positions_from(7, 5, 2);                                     // (2, 5)
  AttentionLayout layout;
  layout.rows = torch::tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6});  // b's 2 real tokens
  ForwardResult r = m->forward(toks, pos, cache.get(), layout);
  EXPECT_LT(maxdiff(r.logits[0], fa.logits[0].narrow(0, 7, 5)), 1e-10);
  EXPECT_LT(maxdiff(r.logits[1].narrow(0, 0, 2), fb.logits[0].narrow(0, 7, 2)), 1e-10);
  EXPECT_LT(maxdiff(r.hidden[1].narrow(0, 0, 2), fb.hidden[0].narrow(0, 7, 2)), 1e-10);
  EXPECT_EQ(r.logits[1].narrow(0, 2, 3).abs().max().item<double>(), 0.0) << "padding: no head";
}

TEST(KVCache, RejectedTokensLeaveNoTrace) {
  Transformer m = make_model();
  torch::Tensor seq = torch::randint(0, 97, {1, 10});
  auto cache = m->make_cache(1, 64);
  cache->add_slot();
  m->forward(seq.narrow(1, 0, 6), positions_from(0, 6), cache.get());
  cache->commit_prefix(0, 6);
  // Verify 4 wrong draft tokens, accept 1 of them (offset 0), reject 3.
  torch::Tensor draft = torch::randint(0, 97, {1, 4});
  draft[0][0] = seq[0][6];
  m->forward(draft, positions_from(6, 4), cache.get());
  cache->commit(0, {0});
  ForwardResult after = m->forward(seq.narrow(1, 7, 3), positions_from(7, 3), cache.get());
  ForwardResult full = m->forward(seq, positions_from(0, 10));
  double d = maxdiff(after.logits, full.logits.narrow(1, 7, 3));
  EXPECT_LT(d, 1e-10) << "maxdiff=" << d;
}

TEST(KVCache, TreePathCompactsToConsecutivePositions) {
  Transformer m = make_model();
  torch::Tensor seq = torch::randint(0, 97, {1, 9});
  auto cache = m->make_cache(1, 64);
  cache->add_slot();
  m->forward(seq.narrow(1, 0, 5), positions_from(0, 5), cache.get());
  cache->commit_prefix(0, 5);
  // Tree of 5 nodes in order: 0 root (depth 0), 1 and 2 children of 0 (depth 1),
  // 3 child of 1 (depth 2), 4 child of 2 (depth 2). The true continuation is 0 -> 2 -> 4.
  torch::Tensor toks = torch::tensor({seq[0][5].item<int64_t>(), 3L, seq[0][6].item<int64_t>(), 7L,
                                      seq[0][7].item<int64_t>()})
                           .view({1, 5});
  torch::Tensor depth = torch::tensor({0L, 1L, 1L, 2L, 2L});
  torch::Tensor tm = torch::zeros({1, 5, 5}, torch::kBool);
  std::vector<int> parent{-1, 0, 0, 1, 2};
  for (int i = 0; i < 5; ++i) {
    for (int a = i; a >= 0; a = parent[a]) tm[0][i][a] = true;
  }
  AttentionLayout layout;
  layout.tree = tm;
  ForwardResult tree = m->forward(toks, (depth + 5).view({1, 5}), cache.get(), layout);
  ForwardResult full = m->forward(seq, positions_from(0, 9));
  // Node 4 (path 0,2,4) sees exactly positions 0..7 of the true sequence.
  double d_tree = maxdiff(tree.logits[0][4], full.logits[0][7]);
  EXPECT_LT(d_tree, 1e-10) << "maxdiff=" << d_tree;
  cache->commit(0, {0, 2, 4});
  EXPECT_EQ(cache->length(0), 8);
  ForwardResult after = m->forward(seq.narrow(1, 8, 1), positions_from(8, 1), cache.get());
  double d = maxdiff(after.logits[0][0], full.logits[0][8]);
  EXPECT_LT(d, 1e-10) << "maxdiff=" << d;
}

TEST(KVCache, RemoveSlotMovesTheLastOne) {
  Transformer m = make_model();
  torch::Tensor seqs = torch::randint(0, 97, {3, 7});
  auto cache = m->make_cache(3, 64);
  for (int i = 0; i < 3; ++i) cache->add_slot();
  m->forward(seqs.narrow(1, 0, 6), positions_from(0, 6, 3), cache.get());
  for (int i = 0; i < 3; ++i) cache->commit_prefix(i, 6);
  cache->remove_slot(0);  // slot 2 moves to 0
  ASSERT_EQ(cache->batch(), 2);
  torch::Tensor next = torch::stack({seqs[2].narrow(0, 6, 1), seqs[1].narrow(0, 6, 1)});
  ForwardResult r = m->forward(next, positions_from(6, 1, 2), cache.get());
  ForwardResult full = m->forward(seqs, positions_from(0, 7, 3));
  double d = std::max(maxdiff(r.logits[0][0], full.logits[2][6]),
                      maxdiff(r.logits[1][0], full.logits[1][6]));
  EXPECT_LT(d, 1e-10) << "maxdiff=" << d;
}

// The static mode of CUDA graphs (KVCache::set_device_lengths), checked on any device: rows
// covering more slots than are active, lengths from a tensor, attention over all max_seq positions.
// The active rows equal the dynamic forward's; committed positions are left alone.
TEST(KVCache, StaticModeEqualsTheDynamicForward) {
  Transformer m = make_model();
  torch::Tensor seqs = torch::randint(0, 97, {2, 12});
  auto cache = m->make_cache(4, 64);
  for (int i = 0; i < 2; ++i) cache->add_slot();
  m->forward(seqs.narrow(1, 0, 7), positions_from(0, 7, 2), cache.get());
  cache->commit_prefix(0, 7), cache->commit_prefix(1, 5);  // ragged: 7 and 5 committed
  // A chain of 3 per row, at each row's length.
  torch::Tensor toks = torch::stack({seqs[0].narrow(0, 7, 3), seqs[1].narrow(0, 5, 3)});  // (2, 3)
  torch::Tensor pos = torch::stack({torch::arange(7, 10), torch::arange(5, 8)});          // (2, 3)
  ForwardResult dynamic = m->forward(toks, pos, cache.get());
  // Static: 4 rows (2 padding rows in unused slots 2 and 3), lengths on the tensor.
  torch::Tensor toks4 = torch::cat({toks, torch::zeros({2, 3}, torch::kInt64)});  // (4, 3)
  torch::Tensor pos4 = torch::cat({pos, positions_from(0, 3, 2)});                // (4, 3)
  cache->set_device_lengths(torch::tensor({7L, 5L, 0L, 0L}));
  EXPECT_TRUE(cache->static_span());
  EXPECT_EQ(cache->batch(), 4);
  ForwardResult stat = m->forward(toks4, pos4, cache.get());
  cache->clear_device_lengths();
  EXPECT_EQ(cache->batch(), 2);
  double d = maxdiff(stat.logits.narrow(0, 0, 2), dynamic.logits);
  EXPECT_LT(d, 1e-10) << "maxdiff=" << d;
  // Committing the chain afterwards continues exactly like the full sequences.
  cache->commit_prefix(0, 3), cache->commit_prefix(1, 3);
  ForwardResult full = m->forward(seqs, positions_from(0, 12, 2));
  ForwardResult next = m->forward(torch::stack({seqs[0].narrow(0, 10, 1), seqs[1].narrow(0, 8, 1)}),
                                  torch::tensor({10L, 8L}).view({2, 1}), cache.get());
  double d_next = std::max(maxdiff(next.logits[0][0], full.logits[0][10]),
                           maxdiff(next.logits[1][0], full.logits[1][8]));
  EXPECT_LT(d_next, 1e-10) << "maxdiff=" << d_next;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tlt_test_" + name)).string();
}

TEST(Drafter, DraftVocabularyRestrictsTheHeadAndFollowsItsUpdates) {
  Transformer target = make_model(3);
  torch::manual_seed(4);
  Drafter drafter(target, 1);
  torch::Tensor h = torch::randn({2, 3, 32}, torch::kFloat64);  // (B, T, C)
  EXPECT_LT(maxdiff(drafter->draft_logits(h), drafter->logits(h)), 1e-12) << "unrestricted";
  EXPECT_EQ(drafter->draft_vocab_size(), 97);
  torch::Tensor ids = torch::tensor(std::vector<int64_t>{5, 2, 90}, torch::kInt64);
  ASSERT_TRUE(drafter->set_draft_vocab(ids).ok());
  EXPECT_EQ(drafter->draft_vocab_size(), 3);
  auto check = [&](const char* when) {
    torch::Tensor full = drafter->logits(h), draft = drafter->draft_logits(h);  // (2, 3, 97)
    ASSERT_EQ(draft.sizes(), full.sizes());
    EXPECT_LT(maxdiff(draft.index_select(2, ids), full.index_select(2, ids)), 1e-12) << when;
    torch::Tensor outside = torch::ones({97}, torch::kBool).index_fill_(0, ids, false);
    EXPECT_TRUE(draft.index({"...", outside}).isinf().all().item<bool>()) << when;
    EXPECT_EQ(draft.argmax(-1).unsqueeze(-1).eq(ids.view({1, 1, 3})).any(-1).all().item<bool>(),
              true)
        << when << ": the best draft token is one of the subset";
  };
  check("before a weight update");
  {
    torch::NoGradGuard g;
    target->lm_head->weight.mul_(-2.0);  // new policy weights arrive in place
  }
  check("after a weight update");
  EXPECT_EQ(drafter->set_draft_vocab(torch::tensor(std::vector<int64_t>{1, 1})).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(drafter->set_draft_vocab(torch::tensor(std::vector<int64_t>{3, 97})).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(drafter->set_draft_vocab(torch::Tensor()).ok());
  EXPECT_LT(maxdiff(drafter->draft_logits(h), drafter->logits(h)), 1e-12) << "restored";
}

TEST(Drafter, TrainingOverADraftVocabularyMatchesTheTargetRenormalisedOnIt) {
  Transformer target = make_model(3);
  torch::manual_seed(5);
  Drafter drafter(target, 1);
  torch::Tensor tokens = torch::randint(0, 97, {2, 6}, torch::kInt64);  // (B, T)
  torch::Tensor hidden = torch::randn({2, 6, 32}, torch::kFloat64);     // (B, T, C)
  torch::Tensor mask = torch::ones({2, 6}, torch::kFloat64);            // (B, T)
  torch::Tensor ids = torch::tensor(std::vector<int64_t>{40, 7, 3, 96, 11}, torch::kInt64);
  // By hand: the feature regression plus the soft cross-entropy over the five ids only.
  auto by_hand = [&](const torch::Tensor& rows) {  // rows (K, C)
    torch::Tensor positions = torch::arange(5, torch::kInt64).view({1, 5}).expand({2, 5});
    torch::Tensor pred = drafter->forward(tokens.narrow(1, 1, 5), hidden.narrow(1, 0, 5),
                                          positions);  // (B, 5, C)
    torch::Tensor want = hidden.narrow(1, 1, 5);
    torch::Tensor p = torch::softmax(torch::matmul(want, rows.t()), -1);  // (B, 5, K)
    torch::Tensor ce = -(p * torch::log_softmax(torch::matmul(pred, rows.t()), -1)).sum(-1);
    torch::Tensor reg = torch::smooth_l1_loss(pred, want, at::Reduction::None).mean(-1);
    return (0.5 * reg + 0.5 * ce).mean().item<double>();
  };
  torch::NoGradGuard no_grad;
  double full = drafter::drafter_loss(drafter, target, tokens, hidden, mask).item<double>();
  EXPECT_NEAR(full, by_hand(target->lm_head->weight), 1e-12) << "the whole vocabulary";
  ASSERT_TRUE(drafter->set_draft_vocab(ids).ok());
  double sub = drafter::drafter_loss(drafter, target, tokens, hidden, mask).item<double>();
  EXPECT_NEAR(sub, by_hand(target->lm_head->weight.index_select(0, ids)), 1e-12);
  EXPECT_GT(std::abs(sub - full), 1e-3) << "the draft vocabulary changed nothing";
}

// Unrolled training must see what a drafted chain sees: for each base j, level 1 from the
// target's features up to j through the drafter's cache, then levels 2..d each from the
// previous level's own prediction, one cached forward at a time (draft_eagle_chain.cc's path).
TEST(Drafter, UnrolledLevelsEqualAChainDraftedThroughTheCache) {
  Transformer target = make_model(3);
  for (int64_t layers : {1, 2}) {
    torch::manual_seed(6);
    Drafter drafter(target, layers);
    drafter->eval();
    const int64_t t = 9, levels = 3;
    torch::Tensor tokens = torch::randint(0, 97, {2, t}, torch::kInt64);  // (B, T)
    torch::Tensor hidden = torch::randn({2, t, 32}, torch::kFloat64);     // (B, T, C)
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> preds =
        drafter::unrolled_predictions(drafter, tokens, hidden, levels);
    ASSERT_EQ(preds.size(), size_t(levels));
    for (int64_t d = 1; d <= levels; ++d) ASSERT_EQ(preds[size_t(d - 1)].size(1), t - d);
    double worst = 0;
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t j = 0; j + levels < t; ++j) {
        auto cache = drafter->make_cache(1, 32);
        cache->add_slot();
        torch::Tensor h = drafter
                              ->forward(tokens[row].narrow(0, 1, j + 1).view({1, -1}),
                                        hidden[row].narrow(0, 0, j + 1).unsqueeze(0),
                                        positions_from(0, j + 1), cache.get())
                              .select(1, j);  // (1, C): level 1 of base j
        cache->commit_prefix(0, j + 1);
        for (int64_t d = 1; d <= levels; ++d) {
          worst = std::max(worst, maxdiff(h[0], preds[size_t(d - 1)][row][j]));
          if (d == levels) break;
          h = drafter
                  ->forward(tokens[row].narrow(0, j + d + 1, 1).view({1, 1}), h.unsqueeze(1),
                            positions_from(j + d, 1), cache.get())
                  .squeeze(1);  // (1, C)
          cache->commit_prefix(0, 1);
        }
      }
    }
    EXPECT_LT(worst, 1e-10) << layers << " drafter layers: maxdiff=" << worst;
    // Level 1 is the one-level forward.
    torch::Tensor one = drafter::unrolled_predictions(drafter, tokens, hidden, 1)[0];
    EXPECT_LT(maxdiff(one, preds[0]), 1e-10);
  }
}

TEST(Drafter, UnrolledLossAddsLevelsAndTrainsWhatDraftingReads) {
  Transformer target = make_model(3);
  torch::manual_seed(7);
  Drafter drafter(target, 1);
  torch::Tensor tokens = torch::randint(0, 97, {2, 8}, torch::kInt64);  // (B, T)
  torch::Tensor hidden = torch::randn({2, 8, 32}, torch::kFloat64);     // (B, T, C)
  torch::Tensor mask = torch::ones({2, 8}, torch::kFloat64);            // (B, T)
  mask.narrow(1, 0, 3).zero_();                                         // a 3-token prompt
  double one, three;
  {
    torch::NoGradGuard no_grad;
    one = drafter::drafter_loss(drafter, target, tokens, hidden, mask, 1).item<double>();
    three = drafter::drafter_loss(drafter, target, tokens, hidden, mask, 3).item<double>();
  }
  EXPECT_GT(three, one * 1.5) << "levels 2 and 3 add their weighted losses";
  // Level 2's loss alone reaches fc through its input feature, level 1's prediction: the
  // gradient of the three-level loss differs from the one-level loss's.
  auto grad_of = [&](int64_t levels) {
    drafter->zero_grad();
    drafter::drafter_loss(drafter, target, tokens, hidden, mask, levels).backward();
    return drafter->fc->weight.grad().clone();
  };
  EXPECT_GT(maxdiff(grad_of(3), grad_of(1)), 1e-6);
  // Bases whose chain starts inside the prompt count nowhere: only j+1 >= 3 is a base.
  drafter::LevelAgreement a = drafter::greedy_agreement(drafter, tokens, hidden, mask, 3);
  ASSERT_EQ(a.bases.size(), 3u);
  EXPECT_EQ(a.bases, (std::vector<int64_t>{2 * 5, 2 * 4, 2 * 3}));
  for (size_t d = 1; d < 3; ++d) EXPECT_LE(a.agreed[d], a.agreed[d - 1]) << "levels nest";
  torch::NoGradGuard no_grad;
  torch::Tensor level1 = drafter::unrolled_predictions(drafter, tokens, hidden, 1)[0];
  torch::Tensor same = drafter->draft_logits(level1).argmax(-1).eq(
      drafter->logits(hidden.narrow(1, 1, 7)).argmax(-1));  // (B, 7)
  EXPECT_EQ(a.agreed[0], same.narrow(1, 2, 5).sum().item<int64_t>()) << "by hand";
}

// A preempted spot trainer gives its step up part-way: whichever of the step's checkpoints sees
// the cancel (before the forward, after it, each level's backward, before the optimizer), the
// drafter and the optimizer are untouched, and the steps after it are exactly those of a trainer
// that never started it.
TEST(Drafter, ACancelledTrainingStepLeavesNoTrace) {
  Transformer target = make_model(3);
  auto fresh = [&] {
    torch::manual_seed(7);
    return Drafter(target, 1);
  };
  torch::manual_seed(11);
  torch::Tensor tokens = torch::randint(0, 97, {2, 8}, torch::kInt64);  // (B, T)
  torch::Tensor hidden = torch::randn({2, 8, 32}, torch::kFloat64);     // (B, T, C)
  torch::Tensor mask = torch::ones({2, 8}, torch::kFloat64);            // (B, T)
  constexpr int64_t kLevels = 3;
  auto weights = [](Drafter& d) {
    std::vector<torch::Tensor> w;
    for (const torch::Tensor& p : d->parameters()) w.push_back(p.detach().clone());
    return w;
  };
  auto max_change = [](const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, maxdiff(a[i], b[i]));
    return m;
  };
  Drafter start = fresh();
  std::vector<torch::Tensor> initial = weights(start);
  // Uninterrupted: the predicate is asked levels + 3 times, and two steps move the weights.
  Drafter ref = fresh();
  drafter::DrafterTrainer ref_trainer(ref, target, 1e-2, kLevels);
  int asks = 0;
  std::optional<double> first = ref_trainer.try_step(tokens, hidden, mask, [&] {
    ++asks;
    return false;
  });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(asks, kLevels + 3);
  double second = ref_trainer.step(tokens, hidden, mask);
  std::vector<torch::Tensor> after_two = weights(ref);
  ASSERT_GT(max_change(after_two, initial), 1e-4);
  for (int k = 1; k <= kLevels + 3; ++k) {
    SCOPED_TRACE("cancelled at ask " + std::to_string(k));
    Drafter d = fresh();
    drafter::DrafterTrainer trainer(d, target, 1e-2, kLevels);
    int n = 0;
    EXPECT_FALSE(trainer.try_step(tokens, hidden, mask, [&] { return ++n == k; }).has_value());
    EXPECT_EQ(n, k) << "the step went on asking after it was cancelled";
    EXPECT_EQ(trainer.steps(), 0);
    EXPECT_EQ(max_change(weights(d), initial), 0.0) << "a cancelled step changed the drafter";
    EXPECT_EQ(trainer.step(tokens, hidden, mask), *first);
    EXPECT_EQ(trainer.step(tokens, hidden, mask), second);
    EXPECT_EQ(max_change(weights(d), after_two), 0.0) << "the cancelled step left a trace";
  }
}

// The drafter's training with bfloat16 products (spec.model.dtype) follows float32's: the same
// loss to bfloat16's precision and an update pointing the same way, and it does run in bfloat16
// (the loss is not float32's to the bit).
TEST(Drafter, Bfloat16TrainingFollowsFloat32) {
  Transformer target = make_model(3);
  target->to(torch::kFloat32);  // autocast leaves float64 alone
  torch::manual_seed(11);
  torch::Tensor tokens = torch::randint(0, 97, {4, 16}, torch::kInt64);  // (B, T)
  torch::Tensor hidden = torch::randn({4, 16, 32});                      // (B, T, C)
  torch::Tensor mask = torch::ones({4, 16});                             // (B, T)
  auto one_step = [&](bool bf16, double* loss) {
    torch::manual_seed(7);
    Drafter d(target, 1);
    std::vector<torch::Tensor> before;
    for (const torch::Tensor& p : d->parameters()) before.push_back(p.detach().clone());
    drafter::DrafterTrainer trainer(d, target, 1e-3, 2, bf16);
    *loss = trainer.step(tokens, hidden, mask);
    std::vector<torch::Tensor> delta;
    auto ps = d->parameters();
    for (size_t i = 0; i < ps.size(); ++i) delta.push_back((ps[i].detach() - before[i]).flatten());
    return torch::cat(delta);  // (P,)
  };
  double f32_loss = 0, bf16_loss = 0;
  torch::Tensor f32 = one_step(false, &f32_loss), bf16 = one_step(true, &bf16_loss);
  EXPECT_NE(bf16_loss, f32_loss) << "the bfloat16 step ran in float32";
  EXPECT_NEAR(bf16_loss, f32_loss, 0.005 * std::abs(f32_loss));  // 2e-5 relative here
  double cosine = (f32 * bf16).sum().item<double>() / (f32.norm() * bf16.norm()).item<double>();
  EXPECT_GT(cosine, 0.9) << "the bfloat16 update points elsewhere";  // 0.997 here
}

TEST(Drafter, MostFrequentTokensBreakTiesByLowerId) {
  torch::Tensor top = most_frequent_tokens({3, 9, 0, 9, 1}, 3);
  ASSERT_TRUE(top.defined());
  EXPECT_EQ(std::vector<int64_t>(top.data_ptr<int64_t>(), top.data_ptr<int64_t>() + 3),
            (std::vector<int64_t>{1, 3, 0}));
  EXPECT_FALSE(most_frequent_tokens({3, 9}, 0).defined());
  EXPECT_FALSE(most_frequent_tokens({3, 9}, 2).defined()) << "all tokens: no restriction";
}

TEST(Checkpoint, RoundTripRestoresOutputs) {
  Transformer a = make_model(1), b = make_model(2);
  std::string path = temp_path("roundtrip.ckpt");
  ASSERT_TRUE(save_checkpoint(*a, path, "preset=test").ok());
  torch::Tensor toks = torch::randint(0, 97, {1, 6});
  EXPECT_GT(maxdiff(a->forward(toks, positions_from(0, 6)).logits,
                    b->forward(toks, positions_from(0, 6)).logits),
            1e-3);
  auto meta = load_checkpoint(*b, path);
  ASSERT_TRUE(meta.ok()) << meta.status().to_string();
  EXPECT_EQ(*meta, "preset=test");
  EXPECT_EQ(maxdiff(a->forward(toks, positions_from(0, 6)).logits,
                    b->forward(toks, positions_from(0, 6)).logits),
            0.0);
  std::filesystem::remove(path);
}

TEST(Checkpoint, WritersRacingToOnePathLeaveAWholeFile) {
  // Two jobs may train the same cached warm start at once and save it to one path: each writer
  // must put a complete file there (one shared temporary file would interleave their bytes).
  Transformer a = make_model(1);
  std::string path = temp_path("raced.ckpt");
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&] {
      for (int i = 0; i < 5; ++i)
        if (!save_checkpoint(*a, path, "raced").ok()) ++failures;
    });
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(failures.load(), 0);
  Transformer b = make_model(2);
  auto meta = load_checkpoint(*b, path);
  ASSERT_TRUE(meta.ok()) << meta.status().to_string();
  EXPECT_EQ(*meta, "raced");
  int leftovers = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    if (e.path().filename().string().rfind("raced.ckpt.tmp", 0) == 0) ++leftovers;
  EXPECT_EQ(leftovers, 0) << "temporary files left next to " << path;
  std::filesystem::remove(path);
}

TEST(Checkpoint, TruncatedOrCorruptFilesAreRefused) {
  Transformer a = make_model(1);
  std::string path = temp_path("corrupt.ckpt");
  ASSERT_TRUE(save_checkpoint(*a, path, "m").ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(data.data(), data.size());
  };
  Transformer b = make_model(2);
  torch::Tensor before = b->lm_head->weight.clone();
  write(bytes.substr(0, bytes.size() / 2));  // truncated
  auto r = load_checkpoint(*b, path);
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  std::string flipped = bytes;
  flipped[flipped.size() - 100] ^= 0x5a;  // one byte inside the payload
  write(flipped);
  r = load_checkpoint(*b, path);
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos);
  write("not a checkpoint at all");
  EXPECT_EQ(load_checkpoint(*b, path).status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(torch::equal(before, b->lm_head->weight)) << "a failed load changes nothing";
  EXPECT_EQ(load_checkpoint(*b, temp_path("missing.ckpt")).status().code(), StatusCode::kNotFound);
  std::filesystem::remove(path);
}

TEST(Checkpoint, OtherArchitectureIsRefusedWithoutChanges) {
  Transformer a = make_model(1);
  std::string path = temp_path("arch.ckpt");
  ASSERT_TRUE(save_checkpoint(*a, path, "m").ok());
  ModelConfig c = test_config();
  c.dim = 48, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 64;
  Transformer other(c);
  other->to(torch::kFloat64);
  torch::Tensor before = other->embed->weight.clone();
  auto r = load_checkpoint(*other, path);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("another configuration"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(torch::equal(before, other->embed->weight));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tlt::model
