#include "runtime/model/drafter.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace tlt::model {

DrafterImpl::DrafterImpl(Transformer target, int64_t n_layers)
    : target_(std::move(target)), n_layers_(n_layers) {
  const ModelConfig& c = target_->config();
  fc = register_module("fc",
                       torch::nn::Linear(torch::nn::LinearOptions(2 * c.dim, c.dim).bias(false)));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < n_layers; ++l) layers->push_back(DecoderLayer(c));
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters()) {
    if (p.key().find("norm") == std::string::npos) p.value().normal_(0.0, 0.02);
  }
  // Start as "pass the target feature through": fc ~ [0 | I] makes the untrained drafter guess
  // that the next hidden state resembles the current one, a better prior than noise.
  fc->weight.narrow(1, c.dim, c.dim).add_(torch::eye(c.dim));
  to(target_->lm_head->weight.device(), target_->lm_head->weight.scalar_type());
}

torch::Tensor DrafterImpl::forward(const torch::Tensor& tokens, const torch::Tensor& features,
                                   const torch::Tensor& positions, KVCache* cache,
                                   const AttentionLayout& layout) {
  torch::Tensor emb;
  {
    torch::NoGradGuard no_grad;
    emb = target_->embed(tokens);  // (B,T,C), frozen
  }
  torch::Tensor x = fc(torch::cat({emb, features}, -1));  // (B,T,C)
  return target_->run_layers(layers, x, positions, cache, layout);
}

torch::Tensor DrafterImpl::logits(const torch::Tensor& hidden) {
  return torch::matmul(hidden, target_->lm_head->weight.detach().t());
}

torch::Tensor DrafterImpl::draft_head() {
  const torch::Tensor& w = target_->lm_head->weight;
  if (!draft_vocab_.defined()) return w.detach();  // (V, C)
  if (!draft_rows_.defined() || w.data_ptr() != rows_ptr_ ||
      int64_t(w._version()) != rows_version_) {
    torch::NoGradGuard no_grad;
    draft_rows_ = w.detach().index_select(0, draft_vocab_);  // (K, C)
    rows_ptr_ = w.data_ptr(), rows_version_ = int64_t(w._version());
  }
  return draft_rows_;
}

torch::Tensor DrafterImpl::draft_logits(const torch::Tensor& hidden) {
  if (!draft_vocab_.defined()) return logits(hidden);
  const torch::Tensor& w = target_->lm_head->weight;
  torch::Tensor sub = torch::matmul(hidden, draft_head().t());  // (..., K)
  std::vector<int64_t> shape = hidden.sizes().vec();
  shape.back() = w.size(0);
  torch::Tensor out =
      torch::full(shape, -std::numeric_limits<double>::infinity(), sub.options());  // (..., V)
  return out.index_copy_(out.dim() - 1, draft_vocab_, sub);
}

Status DrafterImpl::set_draft_vocab(const torch::Tensor& ids) {
  int64_t v = target_->config().vocab;
  draft_rows_ = torch::Tensor(), rows_ptr_ = nullptr, rows_version_ = -1;
  if (!ids.defined() || ids.numel() >= v) {
    draft_vocab_ = torch::Tensor();
    return Status::Ok();
  }
  torch::Tensor c = ids.to(torch::kCPU, torch::kInt64).contiguous().view({-1});
  if (c.numel() == 0)
    return Status::InvalidArgument("draft vocabulary: empty; pass none to use all");
  if (c.min().item<int64_t>() < 0 || c.max().item<int64_t>() >= v) {
    return Status::InvalidArgument("draft vocabulary: token ids must be in [0, " +
                                   std::to_string(v) + ")");
  }
  if (std::get<0>(torch::_unique(c)).numel() != c.numel()) {
    return Status::InvalidArgument("draft vocabulary: token ids repeat; list each once");
  }
  draft_vocab_ = c.to(target_->lm_head->weight.device());
  return Status::Ok();
}

int64_t DrafterImpl::draft_vocab_size() const {
  return draft_vocab_.defined() ? draft_vocab_.numel() : target_->config().vocab;
}

torch::Tensor most_frequent_tokens(const std::vector<int64_t>& counts, int64_t n) {
  if (n <= 0 || n >= int64_t(counts.size())) return torch::Tensor();
  std::vector<int64_t> ids(counts.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int64_t a, int64_t b) { return counts[size_t(a)] > counts[size_t(b)]; });
  ids.resize(size_t(n));
  return torch::tensor(ids, torch::kInt64);
}

std::unique_ptr<KVCache> DrafterImpl::make_cache(int64_t max_batch, int64_t max_seq) const {
  const ModelConfig& c = target_->config();
  const torch::Tensor& w = fc->weight;
  return std::make_unique<KVCache>(n_layers_, max_batch, c.n_kv_heads, max_seq, c.head_dim(),
                                   w.scalar_type(), w.device());
}

}  // namespace tlt::model
