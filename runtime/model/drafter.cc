#include "runtime/model/drafter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "runtime/model/checkpoint.h"

namespace tlt::model {

StatusOr<DrafterFeatures> parse_drafter_features(const std::string& name) {
  if (name == "last") return DrafterFeatures::kLast;
  if (name == "fused") return DrafterFeatures::kFused;
  return Status::InvalidArgument("drafter features: want last or fused (got \"" + name + "\")");
}

const char* drafter_features_name(DrafterFeatures f) {
  return f == DrafterFeatures::kFused ? "fused" : "last";
}

DrafterImpl::DrafterImpl(Transformer target, int64_t n_layers, DrafterFeatures features)
    : target_(std::move(target)), n_layers_(n_layers), features_(features) {
  const ModelConfig& c = target_->config();
  fc = register_module("fc",
                       torch::nn::Linear(torch::nn::LinearOptions(2 * c.dim, c.dim).bias(false)));
  if (fused()) {
    fuse = register_module(
        "fuse", torch::nn::Linear(torch::nn::LinearOptions(3 * c.dim, c.dim).bias(false)));
    target_->set_export_features(true);
  }
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < n_layers; ++l) layers->push_back(DecoderLayer(c));
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters()) {
    if (p.key().find("norm") == std::string::npos) p.value().normal_(0.0, 0.02);
  }
  // Start as "pass the target feature through": fc ~ [0 | I] makes the untrained drafter guess
  // that the next hidden state resembles the current one, a better prior than noise.
  fc->weight.narrow(1, c.dim, c.dim).add_(torch::eye(c.dim));
  // fuse = [0 | 0 | I]: the fused drafter starts reading the final hidden state alone.
  if (fused()) fuse->weight.zero_().narrow(1, 2 * c.dim, c.dim).copy_(torch::eye(c.dim));
  to(target_->lm_head->weight.device(), target_->lm_head->weight.scalar_type());
}

torch::Tensor final_hidden(const torch::Tensor& features, int64_t dim) {
  int64_t w = features.size(-1);
  return w == dim ? features : features.narrow(-1, w - dim, dim);  // (..., C)
}

torch::Tensor DrafterImpl::feature_input(const torch::Tensor& features) {
  const ModelConfig& c = target_->config();
  int64_t w = features.size(-1);
  TORCH_CHECK(w == c.dim || w == 3 * c.dim, "drafter features: width ", w, ", want ", c.dim, " or ",
              3 * c.dim);
  if (w == c.dim) return features;                     // (B,T,C): own or final hidden
  if (!fused()) return final_hidden(features, c.dim);  // (B,T,C)
  auto rms = [&](const torch::Tensor& x) {             // weightless RMS normalisation
    return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + c.norm_eps);
  };
  std::vector<torch::Tensor> parts = features.split(c.dim, -1);           // 3 x (B,T,C)
  return fuse(torch::cat({rms(parts[0]), rms(parts[1]), parts[2]}, -1));  // (B,T,C)
}

torch::Tensor DrafterImpl::input(const torch::Tensor& tokens, const torch::Tensor& features) {
  torch::Tensor emb;
  {
    torch::NoGradGuard no_grad;    // the target's embedding stays frozen
    emb = target_->embed(tokens);  // (B,T,C)
  }
  return fc(torch::cat({emb, feature_input(features)}, -1));  // (B,T,C)
}

torch::Tensor DrafterImpl::forward(const torch::Tensor& tokens, const torch::Tensor& features,
                                   const torch::Tensor& positions, KVCache* cache,
                                   const AttentionLayout& layout) {
  return target_->run_layers(layers, input(tokens, features), positions, cache, layout);
}

torch::Tensor DrafterImpl::forward_level(const torch::Tensor& tokens, const torch::Tensor& features,
                                         const torch::Tensor& positions, LevelKV* kv) {
  const ModelConfig& c = target_->config();
  int64_t b = tokens.size(0), n = tokens.size(1), hkv = c.n_kv_heads, hd = c.head_dim();
  int64_t g = c.n_heads / hkv;
  torch::Tensor x = input(tokens, features);  // (B,N,C)
  kv->k.resize(layers->size()), kv->v.resize(layers->size());
  // (N,N1): base j does not see level 1's entries past j (N1 = level 1's length).
  int64_t n1 = kv->k[0].empty() ? n : kv->k[0][0].size(2);
  torch::Tensor causal = torch::ones({n, n1}, torch::TensorOptions().dtype(torch::kBool))
                             .tril()
                             .logical_not()
                             .to(tokens.device());
  for (size_t l = 0; l < layers->size(); ++l) {
    DecoderLayerImpl* layer = layers[l]->as<DecoderLayerImpl>();
    AttentionImpl& at = *layer->attn;
    torch::Tensor a = layer->attn_norm(x);
    auto heads = [&](torch::nn::Linear& w, int64_t h) {
      return w(a).view({b, n, h, hd}).transpose(1, 2);  // (B,h,N,D)
    };
    torch::Tensor q = target_->rope().apply(heads(at.wq, c.n_heads), positions);  // (B,H,N,D)
    kv->k[l].push_back(target_->rope().apply(heads(at.wk, hkv), positions));      // (B,Hkv,N,D)
    kv->v[l].push_back(heads(at.wv, hkv));                                        // (B,Hkv,N,D)
    const torch::Tensor &k1 = kv->k[l][0], &v1 = kv->v[l][0];  // level 1: (B,Hkv,N1,D)
    // Query heads grouped by their K/V head: (B,Hkv,G,N,D), scaled.
    torch::Tensor qg = q.reshape({b, hkv, g, n, hd}) / std::sqrt(double(hd));
    torch::Tensor s1 = torch::matmul(qg, k1.unsqueeze(2).transpose(-1, -2))
                           .masked_fill(causal, -std::numeric_limits<double>::infinity());
    std::vector<torch::Tensor> parts{s1};  // (B,Hkv,G,N,N1), then (B,Hkv,G,N,1) per later level
    for (size_t e = 1; e < kv->k[l].size(); ++e)
      parts.push_back((qg * kv->k[l][e].narrow(2, 0, n).unsqueeze(2)).sum(-1, /*keepdim=*/true));
    torch::Tensor p = torch::softmax(torch::cat(parts, -1), -1);  // (B,Hkv,G,N,N1+levels-1)
    torch::Tensor out = torch::matmul(p.narrow(-1, 0, n1), v1.unsqueeze(2));  // (B,Hkv,G,N,D)
    for (size_t e = 1; e < kv->v[l].size(); ++e)
      out = out + p.narrow(-1, n1 + int64_t(e) - 1, 1) * kv->v[l][e].narrow(2, 0, n).unsqueeze(2);
    out = out.reshape({b, c.n_heads, n, hd}).transpose(1, 2).reshape({b, n, c.n_heads * hd});
    x = x + at.wo(out);
    x = x + layer->mlp(layer->mlp_norm(x));
  }
  return x;
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

torch::Tensor DrafterImpl::subset_logits(const torch::Tensor& hidden) {
  if (!draft_vocab_.defined()) return logits(hidden);
  return torch::matmul(hidden, draft_head().t());  // (..., K)
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

Status check_drafter_checkpoint(const Drafter& drafter, const std::string& path) {
  StatusOr<torch::Tensor> fuse = read_checkpoint_tensor(path, "fuse.weight");
  if (!fuse.ok() && fuse.status().code() != StatusCode::kNotFound) return fuse.status();
  DrafterFeatures saved = fuse.ok() ? DrafterFeatures::kFused : DrafterFeatures::kLast;
  if (saved == drafter->features_mode()) return Status::Ok();
  return Status::InvalidArgument(
      std::string("drafter checkpoint ") + path +
      ": it holds a drafter of features=" + drafter_features_name(saved) +
      ", and this drafter reads features=" + drafter_features_name(drafter->features_mode()) +
      "; set spec.drafter.features to match it or train a drafter of this kind");
}

StatusOr<std::string> load_drafter_checkpoint(Drafter& drafter, const std::string& path) {
  TLT_RETURN_IF_ERROR(check_drafter_checkpoint(drafter, path));
  return load_checkpoint(*drafter, path);
}

std::unique_ptr<KVCache> DrafterImpl::make_cache(int64_t max_batch, int64_t max_seq) const {
  const ModelConfig& c = target_->config();
  const torch::Tensor& w = fc->weight;
  return std::make_unique<KVCache>(n_layers_, max_batch, c.n_kv_heads, max_seq, c.head_dim(),
                                   w.scalar_type(), w.device());
}

}  // namespace tlt::model
