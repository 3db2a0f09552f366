// Recorded drafter forwards (runtime/rollout/draft_graph.h), on the CPU with the eager recorder
// (the CUDA graphs' stand-in: static inputs and outputs, replay reruns the forward), so that the
// bucketing, the static staging and the fallback decisions are checked without a device:
//  - buckets and catch-up padding;
//  - StaticRows copies the batch and pads the rest, also when the batch shrinks;
//  - a replay equals the drafter's eager forward (float64, printed maxdiff) for a chain level, a
//    catch-up and a tree level with speculative visibility; one recording per shape;
//  - shapes outside the recorded ones run eagerly and are counted;
//  - EAGLE chain and tree drafting through DrafterContext with graphs proposes exactly the trees
//    it proposes without them, over several steps.
// The same drafting check runs on CUDA graphs in cuda_graph_pool_test.cc (GPU flavour).
// Shapes: B rows, N tokens per row, C dim, V vocab.
#include "tests/runtime/draft_graph_fixture.h"

namespace tlt::rollout {
namespace {

using model::Transformer;

TEST(DraftGraph, BucketsAndCatchUpPadding) {
  Transformer m = test_support::draft_target(1, torch::kCPU);
  model::Drafter d(m, 1);
  auto cache = d->make_cache(6, 40);
  DraftGraphOptions o;
  o.max_batch = 6, o.max_tokens = 8;
  DraftGraphs g(d, cache.get(), make_eager_recorder(), o);
  EXPECT_EQ(g.bucket(1), 1);
  EXPECT_EQ(g.bucket(3), 4);
  EXPECT_EQ(g.bucket(5), 6);
  EXPECT_EQ(g.bucket(6), 6);
  EXPECT_EQ(g.bucket(7), -1);
  EXPECT_EQ(g.padded_tokens(1, 0), 1);
  EXPECT_EQ(g.padded_tokens(3, 0), 4);
  EXPECT_EQ(g.padded_tokens(5, 0), 8);
  EXPECT_EQ(g.padded_tokens(9, 0), 9);   // over max_tokens: eager, unpadded
  EXPECT_EQ(g.padded_tokens(3, 37), 3);  // 37 + 4 would pass max_seq 40
  EXPECT_EQ(g.padded_tokens(3, 36), 4);
}

TEST(DraftGraph, StaticRowsPadsTheBucket) {
  torch::Tensor a = torch::arange(6, torch::kInt64).view({3, 2});  // (3, 2)
  torch::Tensor tree = torch::ones({3, 2, 2}, torch::kBool);       // (3, 2, 2)
  StaticRows rows({a, tree}, 4, {torch::Tensor(), torch::eye(2, torch::kBool)});
  rows.stage({a, tree});
  const auto& s = rows.tensors();
  ASSERT_EQ(s[0].sizes(), (std::vector<int64_t>{4, 2}));
  EXPECT_TRUE(s[0].narrow(0, 0, 3).equal(a));
  EXPECT_TRUE(s[0][3].equal(torch::zeros({2}, torch::kInt64)));
  EXPECT_TRUE(s[1][3].equal(torch::eye(2, torch::kBool)));
  rows.stage({a.narrow(0, 0, 1), tree.narrow(0, 0, 1)});  // the batch shrinks: rows 1..3 padded
  EXPECT_TRUE(s[0].narrow(0, 1, 3).eq(0).all().item<bool>());
  EXPECT_TRUE(s[1][2].equal(torch::eye(2, torch::kBool)));
  EXPECT_THROW(rows.stage({torch::zeros({5, 2}, torch::kInt64), tree}), std::invalid_argument);
}

TEST(DraftGraph, ReplayEqualsTheEagerForwardAndFallsBackOutsideTheBuckets) {
  torch::NoGradGuard no_grad;
  Transformer m = test_support::draft_target(2, torch::kCPU);
  torch::manual_seed(3);
  model::Drafter d(m, 1);
  d->eval();
  auto cache = d->make_cache(8, 64);
  auto twin = d->make_cache(8, 64);  // the eager forward's cache, with the same contents
  DraftGraphOptions o;
  o.max_batch = 8, o.max_tokens = 8, o.max_graphs = 3;
  DraftGraphs g(d, cache.get(), make_eager_recorder(), o);
  test_support::fill_ragged(d, {cache.get(), twin.get()}, {9, 6, 4});
  double worst = 0.0;
  int64_t c = m->config().dim;
  auto check = [&](const DraftInputs& in, bool want_replay) {
    bool replayed = !want_replay;
    torch::Tensor got = g.forward(in, &replayed);  // (B, N, C)
    torch::Tensor want = d->forward(in.tokens, in.features, in.positions, twin.get(), in.layout);
    EXPECT_EQ(replayed, want_replay);
    ASSERT_EQ(got.sizes(), want.sizes());
    worst = std::max(worst, (got - want).abs().max().item<double>());
  };
  for (int step = 0; step < 2; ++step) {  // a chain level (N = 1), recorded then replayed
    check(test_support::draft_inputs({9, 6, 4}, 1, c, m->config().vocab, step), true);
  }
  EXPECT_EQ(g.graphs(), 1);
  check(test_support::draft_inputs({9, 6, 4}, 4, c, m->config().vocab, 7), true);  // a catch-up
  DraftInputs tree = test_support::draft_inputs({9, 6, 4}, 2, c, m->config().vocab, 8);
  test_support::add_spec_layout(&tree, {9, 6, 4}, 3);
  check(tree, true);  // a tree level that sees 3 speculative entries
  EXPECT_EQ(g.graphs(), 3);
  EXPECT_EQ(g.replays(), 4);
  // Outside the recorded shapes: too many tokens per row, then a fourth shape past max_graphs.
  check(test_support::draft_inputs({9, 6, 4}, 9, c, m->config().vocab, 9), false);
  check(test_support::draft_inputs({9, 6, 4}, 3, c, m->config().vocab, 9), false);
  EXPECT_EQ(g.fallbacks(), 2);
  EXPECT_EQ(g.fallback_reason(test_support::draft_inputs({9, 6, 4}, 9, c, 64, 0)),
            "more tokens per row than max_tokens");
  std::cout << "recorded drafter forward vs eager: maxdiff " << worst << "\n";
  EXPECT_LT(worst, 1e-9);
}

TEST(DraftGraph, DraftingWithGraphsProposesTheEagerTrees) {
  for (const char* arm : {"4_1_5", "3_3_8"}) {
    test_support::DraftRun eager = test_support::draft_steps(arm, torch::kCPU, nullptr);
    test_support::DraftRun graphed =
        test_support::draft_steps(arm, torch::kCPU, [] { return make_eager_recorder(); });
    EXPECT_EQ(graphed.trees, eager.trees) << arm;
    EXPECT_GT(graphed.stats.draft_graph_replays, 0) << arm;
    EXPECT_EQ(graphed.stats.draft_eager_fallbacks, 0) << arm;
    EXPECT_EQ(eager.stats.draft_graph_replays, 0) << arm;
    std::cout << arm << ": " << graphed.stats.draft_graph_replays << " drafter replays, score "
              << "maxdiff " << test_support::score_maxdiff(graphed, eager) << "\n";
    EXPECT_LT(test_support::score_maxdiff(graphed, eager), 1e-9) << arm;
  }
}

}  // namespace
}  // namespace tlt::rollout
