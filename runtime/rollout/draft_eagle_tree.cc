// EAGLE tree arms ("D_K_N", K > 1), EAGLE-2 style: from the drafter's prediction of h_L, expand
// the K best nodes of each level by their K children, scoring paths by the drafter's cumulative
// log-probability, for D levels; keep the best N nodes (closed under ancestors). All requests of
// the batch expand together, K nodes each per drafter forward. Trees are verified by sampling at
// each node, so pruning unlikely paths is exact.
//
// Coupled children (DraftSettings::coupled_drafts, sampled requests): a node at depth k is a
// guess at the token the target will draw there, which is the winner of the target's race at the
// request's k-th next key (sampling.h). So a node's K children are the first K tokens of the
// drafter's own race at that key (the drafter's distribution at the request's temperature and
// top-p, raced like the target's), not the drafter's K likeliest tokens: when the drafter's
// distribution is close to the target's, the target's draw is usually the first of them, even
// where neither model is sure. A child's score is the log-probability that it wins the target's
// race under a model in which the target's log-probabilities are the drafter's plus independent
// Gumbel noise of scale DraftSettings::coupling_noise: softmax(-log(E_j / q_j) / noise) over the
// drafter's tokens j. Only the drafts change; verification samples the target as always.
//
// Shapes: B batch, K top-k, C model dim, V vocabulary, P speculative drafter entries so far,
// M frontier rows per request whose children are chosen together (1 or K).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "runtime/rollout/batch_util.h"
#include "runtime/rollout/draft_source.h"
#include "runtime/rollout/drafter_context.h"

namespace tlt::rollout {

namespace {

class EagleTreeSource : public DraftSource {
 public:
  EagleTreeSource(const api::Arm& arm, DrafterContext* drafter, const DraftSettings& settings)
      : arm_(arm), drafter_(drafter), settings_(settings) {}

  bool needs_drafter() const override { return true; }
  int64_t headroom() const override { return DrafterContext::headroom(arm_); }
  std::vector<Draft> propose(std::vector<ActiveRequest>& batch) override;

 private:
  // One frontier row's children: (token, score of the child's path minus its parent's).
  using Children = std::vector<std::pair<int64_t, double>>;
  // The batch's trees while they grow.
  struct Growth {
    std::vector<Draft> drafts;
    // Per request: the race keys it will draw depths 1..D with (coupled children), or empty.
    std::vector<std::vector<uint64_t>> ahead;
    std::vector<std::vector<int32_t>> frontier;  // per request: node ids expandable next level
    // Per request: the expanded node ids in drafter-cache order (speculative entries after L).
    std::vector<std::vector<int32_t>> expanded;
    torch::Tensor feat_of_frontier;  // (B, F, C): the pair feature of each frontier node
  };
  // Level 1: the root's K children from the drafter's prediction `root` (B, C) of h_L.
  Growth first_level(const std::vector<ActiveRequest>& batch, const torch::Tensor& root) const;
  // The K children of each of the M rows of h (B, M, C) at depth `level` (1-based), per
  // request and row: the drafter's top K, or coupled children where g.ahead has keys.
  std::vector<std::vector<Children>> children(const std::vector<ActiveRequest>& batch,
                                              const Growth& g, const torch::Tensor& h,
                                              int32_t level) const;
  // Coupled children of one row of drafter logits (n values; column j is token ids[j], or j).
  Children coupled_children(const float* row, int64_t n, const int64_t* ids, uint64_t key,
                            const SamplingParams& sp) const;
  // Levels 2..D: expands the K best frontier nodes of each request.
  void expand_level(const std::vector<ActiveRequest>& batch, int32_t level, Growth& g);
  // The K best frontier nodes of request i by score, each with its row in the frontier.
  std::vector<std::pair<int32_t, int64_t>> best_frontier(const Growth& g, int64_t i) const;
  // Which speculative entries each chosen node may attend to: its expanded ancestors.
  model::AttentionLayout chosen_layout(const std::vector<ActiveRequest>& batch, const Growth& g,
                                       const std::vector<std::vector<int32_t>>& chosen,
                                       torch::Device dev) const;

  api::Arm arm_;
  DrafterContext* drafter_;  // borrowed
  DraftSettings settings_;
};

// Top-K of log_softmax(drafter logits) over the last dim: (values, token ids) on the CPU. Over
// the draft vocabulary alone when there is one (the other tokens' probability is 0).
std::pair<torch::Tensor, torch::Tensor> top_log_probs(model::Drafter& drafter,
                                                      const torch::Tensor& h, int64_t k) {
  torch::Tensor logp = torch::log_softmax(drafter->subset_logits(h).to(torch::kFloat64), -1);
  auto [lp, ix] = logp.topk(k, -1);
  const torch::Tensor& ids = drafter->draft_vocab();
  if (ids.defined()) ix = ids.index({ix});  // columns -> token ids
  return {lp.cpu().contiguous(), ix.cpu().contiguous()};
}

// The score of a child the drafter gives no chance (outside its top-p nucleus): it is verified
// only when nothing likelier fills the arm's budget.
constexpr double kNoChance = -1e6;

EagleTreeSource::Children EagleTreeSource::coupled_children(const float* row, int64_t n,
                                                            const int64_t* ids, uint64_t key,
                                                            const SamplingParams& sp) const {
  int64_t k = arm_.top_k;
  std::vector<double> q = sampling_probs(row, n, sp);
  std::vector<double> r = race_values(q, key, ids);  // E_j / q_j
  std::vector<double> w(static_cast<size_t>(n), -std::numeric_limits<double>::infinity());
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isfinite(r[j])) continue;
    w[j] = -std::log(r[j]) / settings_.coupling_noise;  // log q_j - log E_j, over the noise
    top = std::max(top, w[j]);
  }
  double z = 0.0;
  for (int64_t j = 0; j < n; ++j) z += std::isfinite(w[j]) ? std::exp(w[j] - top) : 0.0;
  double lse = top + std::log(z);
  // The first K of the race (ties and tokens outside the nucleus: by likelier logit).
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t x, int64_t y) {
    return r[x] != r[y] ? r[x] < r[y] : row[x] > row[y];
  });
  Children out;
  for (int64_t c = 0; c < k; ++c) {
    int64_t j = order[size_t(c)];
    out.push_back({ids ? ids[j] : j, std::isfinite(w[j]) ? w[j] - lse : kNoChance});
  }
  return out;
}

std::vector<std::vector<EagleTreeSource::Children>> EagleTreeSource::children(
    const std::vector<ActiveRequest>& batch, const Growth& g, const torch::Tensor& h,
    int32_t level) const {
  torch::Tensor rows = h.dim() == 2 ? h.unsqueeze(1) : h;  // (B, M, C)
  int64_t b = rows.size(0), m = rows.size(1), k = arm_.top_k;
  model::Drafter& drafter = drafter_->drafter();
  bool any_coupled = false, any_top = false;
  for (const auto& keys : g.ahead) (keys.empty() ? any_top : any_coupled) = true;
  torch::Tensor lp_c, ix_c, host, ids_c;
  if (any_top) std::tie(lp_c, ix_c) = top_log_probs(drafter, rows, k);  // (B, M, K)
  if (any_coupled) {
    host = host_logits(drafter->subset_logits(rows));  // (B, M, n)
    if (drafter->draft_vocab().defined())
      ids_c = drafter->draft_vocab().to(torch::kCPU, torch::kInt64).contiguous();  // (n)
  }
  std::vector<std::vector<Children>> out(static_cast<size_t>(b));
  for (auto& rows_of_request : out) rows_of_request.resize(static_cast<size_t>(m));
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t r = 0; r < m; ++r) {
      if (!g.ahead[i].empty()) {
        int64_t n = host.size(2);
        out[i][r] = coupled_children(host.data_ptr<float>() + (i * m + r) * n, n,
                                     ids_c.defined() ? ids_c.data_ptr<int64_t>() : nullptr,
                                     g.ahead[i][size_t(level - 1)], batch[i].req.sampling);
        continue;
      }
      auto lp = lp_c.accessor<double, 3>();
      auto ix = ix_c.accessor<int64_t, 3>();
      for (int64_t x = 0; x < k; ++x) out[i][r].push_back({ix[i][r][x], lp[i][r][x]});
    }
  }
  return out;
}

EagleTreeSource::Growth EagleTreeSource::first_level(const std::vector<ActiveRequest>& batch,
                                                     const torch::Tensor& root) const {
  int64_t b = int64_t(batch.size()), k = arm_.top_k;
  Growth g;
  for (const ActiveRequest& a : batch) {
    g.drafts.push_back({DraftTree(a.pending()), false, {}});
    bool coupled = !a.req.sampling.greedy() && settings_.coupled_drafts;
    g.ahead.push_back(coupled ? a.rng.next_keys(arm_.depth) : std::vector<uint64_t>());
  }
  std::vector<std::vector<Children>> kids = children(batch, g, root, 1);  // (B)(1)(K)
  g.frontier.resize(size_t(b));
  g.expanded.resize(size_t(b));
  for (int64_t i = 0; i < b; ++i)
    for (const auto& [token, score] : kids[i][0])
      g.frontier[i].push_back(g.drafts[i].tree.add(token, 0, score));
  g.feat_of_frontier = root.unsqueeze(1).expand({b, k, root.size(1)}).contiguous();  // (B, K, C)
  return g;
}

std::vector<std::pair<int32_t, int64_t>> EagleTreeSource::best_frontier(const Growth& g,
                                                                        int64_t i) const {
  const DraftTree& tree = g.drafts[i].tree;
  std::vector<int32_t> f = g.frontier[i];
  std::stable_sort(f.begin(), f.end(),
                   [&](int32_t x, int32_t y) { return tree.node(x).score > tree.node(y).score; });
  std::vector<std::pair<int32_t, int64_t>> best;
  for (int64_t j = 0; j < arm_.top_k; ++j) {
    auto it = std::find(g.frontier[i].begin(), g.frontier[i].end(), f[j]);
    best.push_back({f[j], int64_t(it - g.frontier[i].begin())});
  }
  return best;
}

model::AttentionLayout EagleTreeSource::chosen_layout(
    const std::vector<ActiveRequest>& batch, const Growth& g,
    const std::vector<std::vector<int32_t>>& chosen, torch::Device dev) const {
  int64_t b = int64_t(batch.size()), k = arm_.top_k;
  int64_t p = std::max<int64_t>(1, int64_t(g.expanded[0].size()));
  std::vector<uint8_t> vis(size_t(b) * k * p, 0);
  std::vector<int64_t> base(b);
  for (int64_t i = 0; i < b; ++i) {
    base[i] = batch[i].drafter_cached;
    const DraftTree& tree = g.drafts[i].tree;
    const std::vector<int32_t>& ex = g.expanded[i];
    for (int64_t j = 0; j < k; ++j) {
      for (int32_t a = tree.node(chosen[i][j]).parent; a > 0; a = tree.node(a).parent) {
        auto it = std::find(ex.begin(), ex.end(), a);
        if (it != ex.end()) vis[(size_t(i) * k + j) * p + size_t(it - ex.begin())] = 1;
      }
    }
  }
  model::AttentionLayout layout;
  layout.tree = torch::eye(k, torch::kBool).expand({b, k, k}).to(dev);  // (B, K, K)
  if (!g.expanded[0].empty()) {
    layout.spec_base = long_tensor(base, dev);
    layout.spec_visible =
        torch::from_blob(vis.data(), {b, k, p}, torch::kUInt8).to(torch::kBool).to(dev);
  }
  return layout;
}

void EagleTreeSource::expand_level(const std::vector<ActiveRequest>& batch, int32_t level,
                                   Growth& g) {
  int64_t b = int64_t(batch.size()), k = arm_.top_k;
  torch::Device dev = g.feat_of_frontier.device();
  std::vector<int64_t> toks(b * k), pos(b * k), rows_of_chosen(b * k);
  std::vector<std::vector<int32_t>> chosen(b);
  for (int64_t i = 0; i < b; ++i) {
    std::vector<std::pair<int32_t, int64_t>> best = best_frontier(g, i);
    for (int64_t j = 0; j < k; ++j) {
      chosen[i].push_back(best[j].first);
      toks[i * k + j] = g.drafts[i].tree.node(best[j].first).token;
      pos[i * k + j] = batch[i].drafter_len + level - 2;
      rows_of_chosen[i * k + j] = best[j].second;
    }
  }
  int64_t c = g.feat_of_frontier.size(2);
  torch::Tensor rows = long_tensor(rows_of_chosen, dev).view({b, k, 1}).expand({b, k, c});
  torch::Tensor feats = g.feat_of_frontier.gather(1, rows);  // (B, K, C)
  model::AttentionLayout layout = chosen_layout(batch, g, chosen, dev);
  torch::Tensor h = drafter_->forward(long_tensor(toks, dev).view({b, k}), feats,
                                      long_tensor(pos, dev).view({b, k}), layout);  // (B, K, C)
  for (int64_t i = 0; i < b; ++i) {
    drafter_->cache()->commit_prefix(i, k);
    for (int32_t node : chosen[i]) g.expanded[i].push_back(node);
  }
  std::vector<std::vector<Children>> kids = children(batch, g, h, level);  // (B)(K)(K)
  for (int64_t i = 0; i < b; ++i) {
    g.frontier[i].clear();
    for (int64_t j = 0; j < k; ++j) {
      double base_score = g.drafts[i].tree.node(chosen[i][j]).score;
      for (const auto& [token, score] : kids[i][j])
        g.frontier[i].push_back(g.drafts[i].tree.add(token, chosen[i][j], base_score + score));
    }
  }
  // Each new frontier node's pair feature is its parent's predicted hidden state.
  g.feat_of_frontier = h.unsqueeze(2).expand({b, k, k, c}).reshape({b, k * k, c});  // (B, K*K, C)
}

std::vector<Draft> EagleTreeSource::propose(std::vector<ActiveRequest>& batch) {
  torch::Tensor root = drafter_->catch_up(batch);  // (B, C)
  Growth g = first_level(batch, root);
  for (int32_t level = 2; level <= arm_.depth; ++level) expand_level(batch, level, g);
  double min_score = log_or_minus_infinity(settings_.draft_confidence);
  for (size_t i = 0; i < batch.size(); ++i) {
    drafter_->cache()->truncate(int64_t(i), batch[i].drafter_cached);
    g.drafts[i].tree = g.drafts[i].tree.pruned(arm_.verify_tokens, min_score);
  }
  return std::move(g.drafts);
}

}  // namespace

std::unique_ptr<DraftSource> make_eagle_tree_source(const api::Arm& arm, DrafterContext* drafter,
                                                    const DraftSettings& settings) {
  return std::make_unique<EagleTreeSource>(arm, drafter, settings);
}

}  // namespace tlt::rollout
