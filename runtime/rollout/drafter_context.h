// The drafter's side of the rollout engine: the EAGLE drafter module, its KV cache (one slot per
// active request, in the target cache's order) and the catch-up that feeds it the target hidden
// states it has not seen yet. The EAGLE draft sources (draft_eagle_chain.cc, draft_eagle_tree.cc)
// borrow it; model-free sources never touch it.
//
// A request's pending pairs pile up while the drafter does not run (plain steps, n-gram or
// copied drafts, the prompt). Under `catch_up_limit` > 0 older pairs are skipped instead of fed:
// the drafter then attends to the pairs it has, which can only change what it drafts, never
// what is accepted.
//
// Shapes: B batch, T pending pairs, C model dim.
// Thread safety: the engine's one thread.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "api/arm.h"
#include "runtime/model/drafter.h"
#include "runtime/model/kv_cache.h"
#include "runtime/rollout/active_request.h"
#include "runtime/rollout/draft_graph.h"

namespace tlt::rollout {

class DrafterContext {
 public:
  // `drafter` must not be empty. Caches room for max_batch requests of max_seq positions.
  // `feat_options` are the target hidden states' dtype and device; `dim` their width F
  // (TransformerImpl::feature_width: C, or 3C with fused features).
  // `stats` (borrowed, outlives this) gets the pairs never given to the drafter
  // (catch_up_skipped) and the catch-up's time (phases.catch_up).
  DrafterContext(model::Drafter drafter, int64_t max_batch, int64_t max_seq, int64_t dim,
                 torch::TensorOptions feat_options, int32_t catch_up_limit, EngineStats* stats);

  // The cache entries past a request's committed tokens one step of an EAGLE arm writes: the
  // verified draft in the target's, top_k nodes per expanded level in the drafter's.
  static int64_t headroom(const api::Arm& arm) {
    return std::max<int64_t>(arm.verify_tokens + 1, int64_t(arm.top_k) * arm.depth + 2);
  }

  model::Drafter& drafter() { return drafter_; }
  model::KVCache* cache() { return cache_.get(); }

  // From now on the drafter's forwards replay graphs recorded by `recorder` where they can
  // (draft_graph.h), counted in stats (draft_graph_replays, draft_eager_fallbacks).
  void use_graphs(std::unique_ptr<ForwardRecorder> recorder, int64_t max_batch);
  // The drafter's forward with its cache, as DrafterImpl::forward: tokens (B, N), features
  // (B, N, F), positions (B, N) -> (B, N, C), replayed when graphs are in use and can.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& features,
                        const torch::Tensor& positions, const model::AttentionLayout& layout = {});

  // Slots follow the engine's active list: a new request appends one, a retired one's goes.
  void add_slot() { cache_->add_slot(); }
  void remove_slot(int64_t i) { cache_->remove_slot(i); }

  // Queues the target features `hidden` (n, F) that just became committed for request `a`,
  // dropping old pairs past twice the catch-up limit (amortized).
  void record(ActiveRequest& a, const torch::Tensor& hidden);

  // Feeds every request's pending pairs to the drafter in one forward (ragged, padded to the
  // longest) and returns its prediction of each request's h_L: (B, C). Afterwards every
  // request's drafter_len and drafter_cached equal its committed length (less skipped pairs).
  torch::Tensor catch_up(std::vector<ActiveRequest>& batch);

 private:
  // Under the limit, once more than `when_over` pairs are pending, drops those older than the
  // newest `limit` (positions stay absolute, so the later ones keep theirs).
  void skip_old_pairs(ActiveRequest& a, int64_t when_over);

  model::Drafter drafter_;
  std::unique_ptr<model::KVCache> cache_;
  int64_t dim_;
  torch::TensorOptions feat_options_;
  int32_t catch_up_limit_;
  EngineStats* stats_;
  std::unique_ptr<DraftGraphs> graphs_;  // null: eager forwards
};

}  // namespace tlt::rollout
