// Fixtures for the recorded drafter forwards' tests (draft_graph_test.cc on the CPU,
// cuda_graph_pool_test.cc on CUDA): a tiny float64 target, drafter inputs over a cache of ragged
// lengths, and a few steps of EAGLE drafting through a DrafterContext with or without graphs.
// Shapes: B rows, N tokens per row, C dim, P speculative entries.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/arm.h"
#include "runtime/rollout/active_request.h"
#include "runtime/rollout/draft_graph.h"
#include "runtime/rollout/draft_source.h"
#include "runtime/rollout/drafter_context.h"

namespace tlt::rollout::test_support {

// vocab 64, C 32, 2 layers, max_seq 128, float64 with peaked next-token distributions.
inline model::Transformer draft_target(uint64_t seed, torch::Device device) {
  torch::manual_seed(seed);
  model::ModelConfig c;
  c.vocab = 64, c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 64;
  c.max_seq = 128;
  model::Transformer t(c);
  t->to(torch::kFloat64);
  torch::NoGradGuard g;
  t->lm_head->weight.mul_(30.0);
  t->to(device);
  t->eval();
  return t;
}

// Slots 0..B-1 of every cache hold the same random prefix, committed to `lengths`.
inline void fill_ragged(model::Drafter& d, const std::vector<model::KVCache*>& caches,
                        const std::vector<int64_t>& lengths) {
  torch::Device dev = d->fc->weight.device();
  int64_t b = int64_t(lengths.size()), t = *std::max_element(lengths.begin(), lengths.end());
  int64_t c = d->fc->weight.size(0);
  torch::manual_seed(17);
  torch::Tensor toks = torch::randint(64, {b, t}, torch::dtype(torch::kInt64).device(dev));
  torch::Tensor feats = torch::randn({b, t, c}, torch::dtype(torch::kFloat64).device(dev));
  torch::Tensor pos = model::sequential_positions(torch::zeros({b}, torch::kInt64).to(dev), t);
  for (model::KVCache* cache : caches) {
    for (int64_t i = 0; i < b; ++i) cache->add_slot();
    d->forward(toks, feats, pos, cache);
    for (int64_t i = 0; i < b; ++i) cache->commit_prefix(i, lengths[i]);
  }
}

// Random tokens and float64 features for N tokens per row at positions lengths[b] + j.
inline DraftInputs draft_inputs(const std::vector<int64_t>& lengths, int64_t n, int64_t c,
                                int64_t vocab, uint64_t seed, torch::Device dev = torch::kCPU) {
  torch::manual_seed(seed);
  int64_t b = int64_t(lengths.size());
  DraftInputs in;
  in.tokens = torch::randint(vocab, {b, n}, torch::dtype(torch::kInt64).device(dev));
  in.features = torch::randn({b, n, c}, torch::dtype(torch::kFloat64).device(dev));
  in.positions = model::sequential_positions(torch::tensor(lengths).to(dev), n);  // (B, N)
  return in;
}

// A tree level's layout: each node sees itself, and a random subset of the P entries before
// each row's committed length (as speculative entries of earlier levels).
inline void add_spec_layout(DraftInputs* in, const std::vector<int64_t>& lengths, int64_t p) {
  torch::Device dev = in->tokens.device();
  int64_t b = in->tokens.size(0), n = in->tokens.size(1);
  std::vector<int64_t> base;
  for (int64_t l : lengths) base.push_back(l - p);
  in->layout.tree = torch::eye(n, torch::kBool).expand({b, n, n}).to(dev);  // (B, N, N)
  in->layout.spec_base = torch::tensor(base).to(dev);                       // (B,)
  in->layout.spec_visible = (torch::rand({b, n, p}) < 0.5).to(dev);         // (B, N, P)
}

struct DraftRun {
  // Per step, per request: the proposed tree as (token, parent) per node.
  std::vector<std::vector<std::vector<std::pair<int64_t, int32_t>>>> trees;
  std::vector<double> scores;  // every node's score, in order
  EngineStats stats;
};

// The target's hidden states (n, C) of positions [from, L) of `tokens` (L = size - 1).
inline torch::Tensor hidden_of(model::Transformer& m, const std::vector<int64_t>& tokens,
                               int64_t from) {
  torch::Device dev = m->lm_head->weight.device();
  int64_t l = int64_t(tokens.size()) - 1;
  torch::Tensor t =
      torch::tensor(std::vector<int64_t>(tokens.begin(), tokens.end() - 1)).to(dev).view({1, l});
  torch::Tensor pos = torch::arange(l, torch::dtype(torch::kInt64).device(dev)).view({1, l});
  return m->forward(t, pos).hidden[0].narrow(0, from, l - from);  // (n, C)
}

// Four steps of `arm` over three greedy requests with prompts of 5, 8 and 11 tokens: propose,
// then commit two tokens per request (the draft's first node, a fixed one). With `recorder`, the
// drafter's forwards go through DraftGraphs.
inline DraftRun draft_steps(const std::string& arm_name, torch::Device dev,
                            std::function<std::unique_ptr<ForwardRecorder>()> recorder) {
  torch::NoGradGuard no_grad;
  model::Transformer m = draft_target(11, dev);
  torch::manual_seed(5);
  model::Drafter d(m, 1);
  d->eval();
  api::Arm arm;
  std::string why;
  EXPECT_TRUE(api::parse_arm(arm_name, &arm, &why)) << why;
  DraftRun run;
  DrafterContext ctx(d, 8, 96, m->config().dim, m->lm_head->weight.options(), 0, &run.stats);
  if (recorder) ctx.use_graphs(recorder(), 8);
  std::unique_ptr<DraftSource> source = make_draft_source(arm, &ctx, DraftSettings{});
  std::vector<ActiveRequest> batch;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.sampling.temperature = 0.0;
    ActiveRequest a{r, Rng(uint64_t(i)), {}, 0, false, false, {}, 0, 0, 0, 0, 0};
    for (int j = 0; j < 5 + 3 * i; ++j) a.tokens.push_back(int64_t(rng() % 64));
    a.feats.push_back(hidden_of(m, a.tokens, 0));
    ctx.add_slot();
    batch.push_back(std::move(a));
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<Draft> drafts = source->propose(batch);
    run.trees.emplace_back();
    for (size_t i = 0; i < batch.size(); ++i) {
      const DraftTree& tree = drafts[i].tree;
      run.trees.back().emplace_back();
      for (int32_t k = 0; k < tree.size(); ++k) {
        run.trees.back().back().push_back({tree.node(k).token, tree.node(k).parent});
        run.scores.push_back(tree.node(k).score);
      }
      ActiveRequest& a = batch[i];
      int64_t from = a.committed();
      a.tokens.push_back(tree.size() > 1 ? tree.node(1).token : 1);
      a.tokens.push_back(int64_t((step * 5 + i) % 64));
      a.feats.push_back(hidden_of(m, a.tokens, from));
    }
  }
  return run;
}

inline double score_maxdiff(const DraftRun& a, const DraftRun& b) {
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.scores.size(), b.scores.size()); ++i)
    worst = std::max(worst, std::abs(a.scores[i] - b.scores[i]));
  return a.scores.size() == b.scores.size() ? worst : 1e30;
}

}  // namespace tlt::rollout::test_support
