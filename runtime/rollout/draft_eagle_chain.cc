// EAGLE chain arms ("D_1_N"): the drafter, caught up on the target's hidden states, drafts one
// token per level for up to min(D, N - 1) levels, every request of the batch in one drafter
// forward per level. Greedy and reproducible requests take the drafter's top token (or, under
// coupled_drafts, the drafter's own race at the key the target will draw that position with);
// other sampled requests draw from the drafter and are verified by rejection.
//
// Shapes: B batch, C model dim, V vocabulary, K draft vocabulary.
#include <algorithm>
#include <cmath>

#include "runtime/rollout/batch_util.h"
#include "runtime/rollout/draft_source.h"
#include "runtime/rollout/drafter_context.h"

namespace tlt::rollout {

namespace {

class EagleChainSource : public DraftSource {
 public:
  EagleChainSource(const api::Arm& arm, DrafterContext* drafter, const DraftSettings& settings)
      : arm_(arm),
        depth_(std::min(arm.depth, arm.verify_tokens - 1)),
        drafter_(drafter),
        settings_(settings) {}

  bool needs_drafter() const override { return true; }
  int64_t headroom() const override { return DrafterContext::headroom(arm_); }
  std::vector<Draft> propose(std::vector<ActiveRequest>& batch) override;

 private:
  // Per request, the state of its chain while levels are drafted.
  struct Chain {
    double score = 0.0;           // log of the product of the drafter's top probabilities so far
    bool ended = false;           // cut by draft_confidence
    std::vector<uint64_t> ahead;  // coupled_drafts: the race keys the request will draw next
  };
  std::vector<Chain> start_chains(const std::vector<ActiveRequest>& batch) const;
  // Whether the drafter's logits must cover the whole vocabulary: a request that drafts by
  // sampling needs its full distribution for rejection. Otherwise drafting reads them over the
  // draft vocabulary alone (when there is one).
  bool needs_full_vocabulary(const std::vector<ActiveRequest>& batch) const;
  // Drafts level k (1-based) of request `a`'s chain from the drafter's logits `row` (n values,
  // column j being token ids[j], or token j when ids is null); returns the drafted token, or the
  // row's best token when the chain ends or has ended.
  int64_t draft_node(ActiveRequest& a, const float* row, int64_t n, const int64_t* ids, int32_t k,
                     Chain& chain, Draft& draft) const;

  api::Arm arm_;
  int32_t depth_;
  DrafterContext* drafter_;  // borrowed
  DraftSettings settings_;
};

std::vector<EagleChainSource::Chain> EagleChainSource::start_chains(
    const std::vector<ActiveRequest>& batch) const {
  std::vector<Chain> chains(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].req.sampling.greedy() || !settings_.reproducible || !settings_.coupled_drafts)
      continue;
    chains[i].ahead = batch[i].rng.next_keys(depth_);
  }
  return chains;
}

bool EagleChainSource::needs_full_vocabulary(const std::vector<ActiveRequest>& batch) const {
  for (const ActiveRequest& a : batch) {
    if (!a.req.sampling.greedy() && !settings_.reproducible) return true;
  }
  return false;
}

// Under draft_confidence a chain ends before the node at which the product of the drafter's top
// probabilities so far would fall below it. The decision uses only the distribution the node
// would be drawn from, never the drawn token, so sampled chains stay exact under rejection.
int64_t EagleChainSource::draft_node(ActiveRequest& a, const float* row, int64_t n,
                                     const int64_t* ids, int32_t k, Chain& chain,
                                     Draft& draft) const {
  auto token = [&](int64_t j) { return ids ? ids[j] : j; };
  int64_t top = token(argmax(row, n));  // what an ended chain feeds the batched forward (unused)
  if (chain.ended) return top;
  const SamplingParams& sp = a.req.sampling;
  bool sampled = !sp.greedy() && !settings_.reproducible;
  bool coupled = !chain.ahead.empty();
  std::vector<double> dist;
  if (sampled || coupled) dist = sampling_probs(row, n, sp);
  if (settings_.draft_confidence > 0.0) {  // (n exponentials a node: only when asked)
    double p = dist.empty() ? top_probability(row, n) : *std::max_element(dist.begin(), dist.end());
    if (chain.score + std::log(p) < log_or_minus_infinity(settings_.draft_confidence)) {
      chain.ended = true;
      return top;
    }
    chain.score += std::log(p);
  }
  int64_t d = top;
  if (coupled) {
    uint64_t key = chain.ahead[size_t(k - 1)];
    d = ids ? ids[race(dist, key, ids)] : race(dist, key);
  }
  if (sampled) {  // (n = V here: needs_full_vocabulary)
    draft.q.push_back(std::move(dist));
    d = sample(draft.q.back(), a.rng);
  }
  draft.tree.add(d, k - 1, chain.score);
  return d;
}

std::vector<Draft> EagleChainSource::propose(std::vector<ActiveRequest>& batch) {
  int64_t b = int64_t(batch.size());
  torch::Tensor h = drafter_->catch_up(batch);  // (B, C)
  torch::Device dev = h.device();
  model::Drafter& drafter = drafter_->drafter();
  std::vector<Draft> drafts;
  for (const ActiveRequest& a : batch)
    drafts.push_back({DraftTree(a.pending()), !settings_.reproducible, {}});
  std::vector<Chain> chains = start_chains(batch);
  int64_t live = b;
  // Columns of the host logits: token ids[j] over the draft vocabulary, else token j.
  bool full = needs_full_vocabulary(batch);
  torch::Tensor ids;
  if (!full && drafter->draft_vocab().defined())
    ids = drafter->draft_vocab().to(torch::kCPU, torch::kInt64).contiguous();  // (K)
  const int64_t* id = ids.defined() ? ids.data_ptr<int64_t>() : nullptr;
  for (int32_t k = 1; k <= depth_ && live > 0; ++k) {
    torch::Tensor logits =
        host_logits(full ? drafter->draft_logits(h) : drafter->subset_logits(h));  // (B, V|K)
    int64_t n = logits.size(1);
    std::vector<int64_t> toks(b), pos(b);
    for (int64_t i = 0; i < b; ++i) {
      bool was_ended = chains[i].ended;
      toks[i] =
          draft_node(batch[i], logits.data_ptr<float>() + i * n, n, id, k, chains[i], drafts[i]);
      pos[i] = batch[i].drafter_len + k - 1;
      if (chains[i].ended && !was_ended) --live;
    }
    if (k == depth_ || live == 0) break;
    h = drafter_
            ->forward(long_tensor(toks, dev).view({b, 1}), h.unsqueeze(1),
                      long_tensor(pos, dev).view({b, 1}))
            .squeeze(1);  // (B, C)
    for (int64_t i = 0; i < b; ++i) drafter_->cache()->commit_prefix(i, 1);
  }
  for (int64_t i = 0; i < b; ++i) drafter_->cache()->truncate(i, batch[i].drafter_cached);
  return drafts;
}

}  // namespace

std::unique_ptr<DraftSource> make_eagle_chain_source(const api::Arm& arm, DrafterContext* drafter,
                                                     const DraftSettings& settings) {
  return std::make_unique<EagleChainSource>(arm, drafter, settings);
}

}  // namespace tlt::rollout
