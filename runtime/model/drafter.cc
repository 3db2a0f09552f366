#include "runtime/model/drafter.h"

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

std::unique_ptr<KVCache> DrafterImpl::make_cache(int64_t max_batch, int64_t max_seq) const {
  const ModelConfig& c = target_->config();
  const torch::Tensor& w = fc->weight;
  return std::make_unique<KVCache>(n_layers_, max_batch, c.n_kv_heads, max_seq, c.head_dim(),
                                   w.scalar_type(), w.device());
}

}  // namespace tlt::model
