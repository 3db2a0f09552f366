// CUDA graphs of the verify forward (runtime/rollout/cuda_graph_pool.h; GPU flavour only, every
// test skips without a CUDA device):
//  - a replay equals the eager forward on the same cache (float64, printed maxdiff), for ragged
//    lengths, a padded bucket, and on later replays with other inputs;
//  - graphs are keyed by (bucket, N): batches in one bucket and arms with one N share a graph;
//  - the engine with graphs produces exactly the tokens of the engine without them and of the
//    CPU (plain decoding, whose steps replay the graph of N = 1; chain, tree and n-gram arms;
//    two arms sharing N = 5), and its drafter's forwards replay graphs too;
//  - drafting through CUDA graphs of the drafter's forwards (draft_graph.h) proposes exactly the
//    trees of eager drafting on CUDA and on the CPU, chain and tree arms.
// Shapes: B rows, N tokens per row, V vocab.
#include <gtest/gtest.h>

#include <random>

#include "runtime/rollout/cuda_graph_pool.h"
#include "runtime/rollout/engine.h"
#include "tests/runtime/draft_graph_fixture.h"
#include "tests/runtime/requests.h"

namespace tlt::rollout {
namespace {

using model::Drafter;
using model::Transformer;

#define TLT_REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

Transformer make_target(uint64_t seed, torch::Device device) {
  torch::manual_seed(seed);
  model::ModelConfig c;
  c.vocab = 64, c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 64;
  c.max_seq = 128;
  Transformer t(c);
  t->to(torch::kFloat64);
  torch::NoGradGuard g;
  t->lm_head->weight.mul_(30.0);  // peaked next-token distributions, as in rollout_test.cc
  t->to(device);
  t->eval();
  return t;
}

double maxdiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// A chain tree (B, N, N): node t sees nodes 0..t.
torch::Tensor chain(int64_t b, int64_t n, torch::Device device) {
  return torch::ones({n, n}, torch::dtype(torch::kBool).device(device)).tril().expand({b, n, n});
}

TEST(CudaGraphPool, ReplayEqualsTheEagerForward) {
  TLT_REQUIRE_CUDA();
  torch::NoGradGuard no_grad;
  torch::Device dev(torch::kCUDA);
  Transformer m = make_target(1, dev);
  auto cache = m->make_cache(8, 128);
  CudaGraphPool pool(m, cache.get());
  EXPECT_EQ(pool.bucket(1), 1);
  EXPECT_EQ(pool.bucket(3), 4);
  EXPECT_EQ(pool.bucket(8), 8);
  // Three requests with ragged committed lengths 9, 6 and 4.
  for (int i = 0; i < 3; ++i) cache->add_slot();
  torch::Tensor prompt = torch::randint(64, {3, 9}, torch::dtype(torch::kInt64).device(dev));
  m->forward(prompt, model::sequential_positions(torch::zeros({3}, torch::kInt64).to(dev), 9),
             cache.get());
  cache->commit_prefix(0, 9), cache->commit_prefix(1, 6), cache->commit_prefix(2, 4);
  torch::Tensor start = torch::tensor({9L, 6L, 4L}).to(dev);
  double worst = 0.0;
  for (int step = 0; step < 3; ++step) {  // capture once, then replay with other tokens
    torch::Tensor toks = torch::randint(64, {3, 5}, torch::dtype(torch::kInt64).device(dev));
    torch::Tensor pos = model::sequential_positions(start, 5);  // (B, N)
    model::AttentionLayout layout;
    layout.tree = chain(3, 5, dev);
    torch::Tensor eager = m->forward(toks, pos, cache.get(), layout).logits.clone();  // (B, N, V)
    model::ForwardResult r = pool.forward(toks, pos, layout.tree);
    ASSERT_EQ(r.logits.sizes(), eager.sizes());
    worst = std::max(worst, maxdiff(r.logits, eager));
  }
  std::cout << "cuda graph replay vs eager verify forward: maxdiff " << worst << "\n";
  EXPECT_LT(worst, 1e-9);
  EXPECT_EQ(pool.graphs(), 1);
  EXPECT_EQ(pool.captures(), 1);
  EXPECT_EQ(pool.replays(), 3);

  // A fourth request joins: still bucket 4, same graph; another N makes a second graph.
  cache->add_slot();  // an empty slot: its chain starts at position 0
  torch::Tensor toks4 = torch::randint(64, {4, 5}, torch::dtype(torch::kInt64).device(dev));
  torch::Tensor pos4 =
      model::sequential_positions(torch::tensor({9L, 6L, 4L, 0L}).to(dev), 5);  // (4, 5)
  model::AttentionLayout layout4;
  layout4.tree = chain(4, 5, dev);
  torch::Tensor eager4 = m->forward(toks4, pos4, cache.get(), layout4).logits.clone();
  double d4 = maxdiff(pool.forward(toks4, pos4, layout4.tree).logits, eager4);
  EXPECT_LT(d4, 1e-9) << "maxdiff=" << d4;
  EXPECT_EQ(pool.graphs(), 1);
  torch::Tensor toks8 = torch::randint(64, {4, 8}, torch::dtype(torch::kInt64).device(dev));
  pool.forward(toks8, model::sequential_positions(torch::tensor({9L, 6L, 4L, 0L}).to(dev), 8),
               chain(4, 8, dev));
  EXPECT_EQ(pool.graphs(), 2);
}

std::vector<Completion> run(Transformer target, Drafter drafter, EngineOptions o,
                            const std::vector<Request>& reqs, EngineStats* stats) {
  auto engine = Engine::create(target, drafter, o);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  auto out = (*engine)->generate(reqs);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  *stats = (*engine)->stats();
  return out.ok() ? *out : std::vector<Completion>{};
}

TEST(CudaGraphPool, EngineWithGraphsEqualsWithoutAndTheCpu) {
  TLT_REQUIRE_CUDA();
  Transformer cpu = make_target(11, torch::kCPU);
  Transformer gpu = make_target(11, torch::kCUDA);  // the same weights: same seed, then moved
  std::vector<Request> reqs = rollout::test_support::random_requests(48, 64, 20, 0.0, 3);
  EngineOptions plain;
  plain.max_batch = 16, plain.max_seq = 128, plain.speculative = false;
  EngineStats st;
  std::vector<Completion> want = run(cpu, Drafter(nullptr), plain, reqs, &st);
  ASSERT_EQ(want.size(), reqs.size());
  // Plain decoding on the GPU replays the graph of N = 1 at every step, with the CPU's tokens.
  for (bool graphs : {true, false}) {
    EngineOptions o = plain;
    o.cuda_graphs = graphs;
    std::vector<Completion> got = run(gpu, Drafter(nullptr), o, reqs, &st);
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += got[i].tokens != want[i].tokens;
    EXPECT_EQ(bad, 0) << "plain decoding " << (graphs ? "with" : "without") << " graphs";
    EXPECT_GT(st.plain_steps, 0);
    EXPECT_EQ(st.graph_replays, graphs ? st.plain_steps : 0);
  }
  torch::manual_seed(5);
  Drafter drafter(gpu, 1);
  drafter->eval();
  std::vector<std::vector<std::string>> arm_sets{
      {"4_1_5"}, {"3_3_8"}, {"ngram"}, {"4_1_5", "2_2_5"}};  // the last two share N
  for (const auto& arms : arm_sets) {
    for (bool graphs : {true, false}) {
      EngineOptions o = plain;
      o.speculative = true, o.activation_threshold = 1000, o.arms = arms, o.cuda_graphs = graphs;
      o.selector = arms.size() == 1 ? "fixed" : "bucketed-epsilon-greedy";
      o.plain_arm = false;
      std::vector<Completion> got = run(gpu, drafter, o, reqs, &st);
      ASSERT_EQ(got.size(), want.size());
      int bad = 0;
      for (size_t i = 0; i < got.size(); ++i) bad += got[i].tokens != want[i].tokens;
      std::string what = arms[0] + (arms.size() > 1 ? "+" + arms[1] : "") +
                         (graphs ? " with graphs" : " without graphs");
      EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " requests differ";
      if (graphs) {
        EXPECT_EQ(st.graph_replays, st.spec_steps + st.plain_steps) << what;
        if (arms[0] != "ngram") {
          EXPECT_GT(st.draft_graph_replays, 0) << what;
        }
      } else {
        EXPECT_EQ(st.graph_replays, 0) << what;
        EXPECT_EQ(st.draft_graph_replays + st.draft_eager_fallbacks, 0) << what;
      }
      EXPECT_GT(st.spec_steps, 0) << what;
      std::cout << what << ": " << st.spec_steps << " speculative steps, " << st.graph_replays
                << " graph replays, " << st.draft_graph_replays << " drafter replays, "
                << st.draft_eager_fallbacks << " drafter eager fallbacks, accept length "
                << st.accept_length() << "\n";
    }
  }
}

TEST(CudaGraphPool, DraftingWithGraphsProposesTheEagerTrees) {
  TLT_REQUIRE_CUDA();
  torch::Device dev(torch::kCUDA);
  Transformer m = make_target(1, dev);
  auto cache = m->make_cache(8, 128);
  CudaGraphPool pool(m, cache.get());  // its memory pool holds the drafter's graphs
  for (const char* arm : {"4_1_5", "3_3_8"}) {
    test_support::DraftRun cpu = test_support::draft_steps(arm, torch::kCPU, nullptr);
    test_support::DraftRun eager = test_support::draft_steps(arm, dev, nullptr);
    test_support::DraftRun graphed =
        test_support::draft_steps(arm, dev, [&] { return pool.draft_recorder(); });
    EXPECT_EQ(graphed.trees, eager.trees) << arm;
    EXPECT_EQ(graphed.trees, cpu.trees) << arm;
    EXPECT_GT(graphed.stats.draft_graph_replays, 0) << arm;
    EXPECT_EQ(graphed.stats.draft_eager_fallbacks, 0) << arm;
    double d = test_support::score_maxdiff(graphed, eager);
    std::cout << arm << ": drafter graphs vs eager on CUDA: " << graphed.stats.draft_graph_replays
              << " replays, score maxdiff " << d << "\n";
    EXPECT_LT(d, 1e-9) << arm;
  }
}

}  // namespace
}  // namespace tlt::rollout
