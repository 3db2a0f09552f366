#include "runtime/rollout/drafter_context.h"

#include <algorithm>

#include "runtime/rollout/batch_util.h"
#include "runtime/rollout/phase_clock.h"

namespace tlt::rollout {

DrafterContext::DrafterContext(model::Drafter drafter, int64_t max_batch, int64_t max_seq,
                               int64_t dim, torch::TensorOptions feat_options,
                               int32_t catch_up_limit, EngineStats* stats)
    : drafter_(std::move(drafter)),
      cache_(drafter_->make_cache(max_batch, max_seq)),
      dim_(dim),
      feat_options_(feat_options),
      catch_up_limit_(catch_up_limit),
      stats_(stats) {}

void DrafterContext::use_graphs(std::unique_ptr<ForwardRecorder> recorder, int64_t max_batch) {
  DraftGraphOptions o;
  o.max_batch = max_batch;
  graphs_ = std::make_unique<DraftGraphs>(drafter_, cache_.get(), std::move(recorder), o);
}

torch::Tensor DrafterContext::forward(const torch::Tensor& tokens, const torch::Tensor& features,
                                      const torch::Tensor& positions,
                                      const model::AttentionLayout& layout) {
  if (!graphs_) return drafter_->forward(tokens, features, positions, cache_.get(), layout);
  bool replayed = false;
  torch::Tensor out = graphs_->forward({tokens, features, positions, layout}, &replayed);
  ++(replayed ? stats_->draft_graph_replays : stats_->draft_eager_fallbacks);
  return out;
}

void DrafterContext::record(ActiveRequest& a, const torch::Tensor& hidden) {
  a.feats.push_back(hidden);
  skip_old_pairs(a, /*when_over=*/2 * int64_t(catch_up_limit_));  // amortized
}

void DrafterContext::skip_old_pairs(ActiveRequest& a, int64_t when_over) {
  int64_t limit = catch_up_limit_;
  int64_t pending = a.committed() - a.drafter_len;
  if (limit <= 0 || pending <= std::max(limit, when_over)) return;
  int64_t skip = pending - limit;
  a.drafter_len += skip;
  stats_->catch_up_skipped += skip;
  torch::Tensor rest = torch::cat(a.feats, 0).narrow(0, skip, limit);  // (limit, C)
  a.feats.assign(1, rest);
}

torch::Tensor DrafterContext::catch_up(std::vector<ActiveRequest>& batch) {
  PhaseClock clock(&stats_->phases.catch_up, &stats_->phases);
  int64_t b = int64_t(batch.size()), c = dim_;
  torch::Device dev = feat_options_.device();
  std::vector<int64_t> n(b);
  int64_t t = 1, start = 0;  // start: the largest position or cache length a row writes from
  for (int64_t i = 0; i < b; ++i) {
    skip_old_pairs(batch[i], 0);
    start = std::max({start, batch[i].drafter_len, cache_->length(i)});
    n[i] = batch[i].committed() - batch[i].drafter_len;
    t = std::max(t, n[i]);
  }
  // Padding to a recorded length changes no row's result: rows past a request's pairs come after
  // them (causal) and are never committed.
  if (graphs_) t = graphs_->padded_tokens(t, start);
  std::vector<int64_t> toks(b * t, 0), pos(b * t, 0);
  torch::Tensor feats = torch::zeros({b, t, c}, feat_options_);  // (B, T, C)
  for (int64_t i = 0; i < b; ++i) {
    ActiveRequest& a = batch[i];
    if (n[i] > 0) feats[i].narrow(0, 0, n[i]).copy_(torch::cat(a.feats, 0));
    for (int64_t j = 0; j < t; ++j) {
      int64_t p = a.drafter_len + std::min(j, std::max<int64_t>(n[i] - 1, 0));
      toks[i * t + j] = a.tokens[p + 1];  // pair p = (h_p, t_{p+1})
      pos[i * t + j] = a.drafter_len + j;
    }
  }
  torch::Tensor out =
      forward(long_tensor(toks, dev).view({b, t}), feats, long_tensor(pos, dev).view({b, t}));
  std::vector<int64_t> last(b);
  for (int64_t i = 0; i < b; ++i) {
    cache_->commit_prefix(i, n[i]);
    batch[i].drafter_len += n[i];
    batch[i].drafter_cached += n[i];
    batch[i].feats.clear();
    last[i] = std::max<int64_t>(n[i] - 1, 0);
  }
  torch::Tensor idx = long_tensor(last, dev).view({b, 1, 1}).expand({b, 1, out.size(2)});
  return out.gather(1, idx).squeeze(1);  // (B, C)
}

}  // namespace tlt::rollout
