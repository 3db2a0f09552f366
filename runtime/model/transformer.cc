#include "runtime/model/transformer.h"

#include <algorithm>
#include <cmath>

#include "runtime/model/decode_attention.h"
#include "runtime/model/precision.h"

namespace tlt::model {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_) * weight;
}

Rope::Rope(const ModelConfig& c) {
  int64_t half = c.head_dim() / 2;
  torch::Tensor inv = torch::pow(c.rope_theta, -torch::arange(half, torch::kFloat64) / half);
  torch::Tensor angles = torch::outer(torch::arange(c.max_seq, torch::kFloat64), inv);  // (S, D/2)
  cos = angles.cos();
  sin = angles.sin();
}

torch::Tensor Rope::apply(const torch::Tensor& x, const torch::Tensor& positions) const {
  int64_t half = x.size(-1) / 2;
  // On a GPU, gather from copies of the tables there: no host round trip per layer, and nothing
  // a CUDA graph capture could not record (the first forward on the device makes the copies).
  bool here = x.device() == cos.device();
  if (!here && (!cos_on_device_.defined() || cos_on_device_.device() != x.device())) {
    cos_on_device_ = cos.to(x.device());
    sin_on_device_ = sin.to(x.device());
  }
  torch::Tensor flat = positions.reshape({-1}).to(x.device());
  // (B, T, D/2) -> (B, 1, T, D/2) in x's dtype and device.
  auto gather = [&](const torch::Tensor& table) {
    return table.index_select(0, flat)
        .view({positions.size(0), 1, positions.size(1), half})
        .to(x.options());
  };
  torch::Tensor c = gather(here ? cos : cos_on_device_), s = gather(here ? sin : sin_on_device_);
  torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

torch::Tensor attention_mask(const torch::Tensor& lengths, int64_t t, int64_t s,
                             const AttentionLayout& layout, torch::Dtype dtype) {
  int64_t b = lengths.size(0);
  auto long_opts = torch::TensorOptions().dtype(torch::kInt64).device(lengths.device());
  torch::Tensor tm =
      layout.tree.defined()
          ? layout.tree.to(torch::kBool)
          : torch::ones({t, t}, long_opts.dtype(torch::kBool)).tril().expand({b, t, t});
  torch::Tensor pos = torch::arange(s, long_opts).view({1, 1, s});
  torch::Tensor rel = pos - lengths.view({b, 1, 1});  // (B,1,S)
  torch::Tensor in_new = (rel >= 0) & (rel < t);
  torch::Tensor allowed = tm.gather(2, rel.clamp(0, t - 1).expand({b, t, s})) & in_new;  // (B,T,S)
  if (layout.spec_base.defined()) {
    torch::Tensor srel = pos - layout.spec_base.view({b, 1, 1});  // (B,1,S)
    int64_t p = layout.spec_visible.size(2);
    torch::Tensor in_spec = (srel >= 0) & (rel < 0);
    torch::Tensor seen =
        layout.spec_visible.to(torch::kBool).gather(2, srel.clamp(0, p - 1).expand({b, t, s}));
    allowed = allowed | (seen & in_spec) | (srel < 0);
  } else {
    allowed = allowed | (rel < 0);
  }
  torch::Tensor zero =
      torch::zeros({}, torch::TensorOptions().dtype(dtype).device(lengths.device()));
  torch::Tensor ninf = torch::full({}, -std::numeric_limits<double>::infinity(), zero.options());
  return torch::where(allowed, zero, ninf).view({b, 1, 1, t, s});
}

AttentionImpl::AttentionImpl(const ModelConfig& c)
    : n_heads_(c.n_heads), n_kv_heads_(c.n_kv_heads), head_dim_(c.head_dim()) {
  auto lin = [](int64_t in, int64_t out, bool bias = false) {
    return torch::nn::LinearOptions(in, out).bias(bias);
  };
  wq = register_module("wq", torch::nn::Linear(lin(c.dim, n_heads_ * head_dim_, c.qkv_bias)));
  wk = register_module("wk", torch::nn::Linear(lin(c.dim, n_kv_heads_ * head_dim_, c.qkv_bias)));
  wv = register_module("wv", torch::nn::Linear(lin(c.dim, n_kv_heads_ * head_dim_, c.qkv_bias)));
  wo = register_module("wo", torch::nn::Linear(lin(n_heads_ * head_dim_, c.dim)));
}

namespace {
// The rows of x (B, T, C) listed in `rows`: (R, C).
torch::Tensor pack_rows(const torch::Tensor& x, const torch::Tensor& rows) {
  return x.reshape({x.size(0) * x.size(1), x.size(2)}).index_select(0, rows);
}
// packed (R, C') back at `rows` of a (B, T, C') tensor of zeros.
torch::Tensor unpack_rows(const torch::Tensor& packed, const torch::Tensor& rows, int64_t b,
                          int64_t t) {
  return torch::zeros({b * t, packed.size(1)}, packed.options())
      .index_copy_(0, rows, packed)
      .view({b, t, packed.size(1)});
}
}  // namespace

torch::Tensor on_rows(const torch::Tensor& x, const torch::Tensor& rows,
                      const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  if (!rows.defined()) return f(x);
  return unpack_rows(f(pack_rows(x, rows)), rows, x.size(0), x.size(1));  // (B, T, C')
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& positions,
                                     const Rope& rope, const torch::Tensor& mask, KVCache* cache,
                                     int64_t layer, const AttentionLayout& layout) {
  const torch::Tensor& rows = layout.rows;
  int64_t b = x.size(0), t = x.size(1), g = n_heads_ / n_kv_heads_;
  // One gather of the real rows feeds all three projections.
  torch::Tensor xr = rows.defined() ? pack_rows(x, rows) : x;
  auto project = [&](torch::nn::Linear& w, int64_t heads) {
    torch::Tensor y = rows.defined() ? unpack_rows(linear(w, xr), rows, b, t) : linear(w, xr);
    return y.view({b, t, heads, head_dim_}).transpose(1, 2);
  };
  torch::Tensor q = project(wq, n_heads_);     // (B,H,T,D)
  torch::Tensor k = project(wk, n_kv_heads_);  // (B,Hkv,T,D)
  torch::Tensor v = project(wv, n_kv_heads_);  // (B,Hkv,T,D)
  q = rope.apply(q, positions);
  k = rope.apply(k, positions);
  int64_t s = mask.size(-1);
  if (cache != nullptr) {
    cache->write(layer, k, v);
    std::tie(k, v) = cache->view(layer, s);  // (B,Hkv,S,D)
  } else {
    if (layout.record != nullptr) layout.record->k.push_back(k), layout.record->v.push_back(v);
    if (layout.prefix != nullptr) {
      // (1,Hkv,P,D) seen by every row, then the row's own: (B,Hkv,P+T,D); the expand's backward
      // sums the rows' gradients into the prefix.
      const SharedPrefix& p = *layout.prefix;
      k = torch::cat({p.k[size_t(layer)].expand({b, -1, -1, -1}), k}, 2);
      v = torch::cat({p.v[size_t(layer)].expand({b, -1, -1, -1}), v}, 2);
    }
  }
  torch::Tensor out;  // (B,H,T,D)
  if (cache != nullptr && row_invariant_attention_applies(q, k)) {
    out = row_invariant_attention(q, k, v, mask, 1.0 / std::sqrt(double(head_dim_)));
  } else {
    // Query heads grouped by the K/V head they share: (B,Hkv,G*T,D); no K/V copy.
    torch::Tensor qg = q.reshape({b, n_kv_heads_, g * t, head_dim_});
    torch::Tensor scores = torch::matmul(qg, k.transpose(-1, -2)) / std::sqrt(double(head_dim_));
    scores = scores.view({b, n_kv_heads_, g, t, s}) + mask;  // (B,Hkv,G,T,S)
    torch::Tensor probs = torch::softmax(scores, -1).view({b, n_kv_heads_, g * t, s});
    out = torch::matmul(probs, v).view({b, n_heads_, t, head_dim_});
  }
  out = out.transpose(1, 2).reshape({b, t, n_heads_ * head_dim_});
  return on_rows(out, rows, [&](const torch::Tensor& o) { return linear(wo, o); });  // (B,T,C)
}

MlpImpl::MlpImpl(const ModelConfig& c) {
  auto lin = [](int64_t in, int64_t out) { return torch::nn::LinearOptions(in, out).bias(false); };
  w_gate = register_module("w_gate", torch::nn::Linear(lin(c.dim, c.ffn)));
  w_up = register_module("w_up", torch::nn::Linear(lin(c.dim, c.ffn)));
  w_down = register_module("w_down", torch::nn::Linear(lin(c.ffn, c.dim)));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return linear(w_down, torch::silu(linear(w_gate, x)) * linear(w_up, x));
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c) {
  attn_norm = register_module("attn_norm", RMSNorm(c.dim, c.norm_eps));
  attn = register_module("attn", Attention(c));
  mlp_norm = register_module("mlp_norm", RMSNorm(c.dim, c.norm_eps));
  mlp = register_module("mlp", Mlp(c));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& positions,
                                        const Rope& rope, const torch::Tensor& mask, KVCache* cache,
                                        int64_t layer, const AttentionLayout& layout) {
  torch::Tensor h = x + attn(attn_norm(x), positions, rope, mask, cache, layer, layout);
  return h + on_rows(mlp_norm(h), layout.rows, [&](const torch::Tensor& y) { return mlp(y); });
}

TransformerImpl::TransformerImpl(const ModelConfig& c) : config_(c), rope_(c) {
  embed = register_module("embed", torch::nn::Embedding(c.vocab, c.dim));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < c.n_layers; ++l) layers->push_back(DecoderLayer(c));
  norm = register_module("norm", RMSNorm(c.dim, c.norm_eps));
  lm_head = register_module(
      "lm_head", torch::nn::Linear(torch::nn::LinearOptions(c.dim, c.vocab).bias(false)));
  // GPT-2 style initialisation: small weights, residual projections scaled by depth.
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters()) {
    if (p.key().find("norm") != std::string::npos) continue;
    double std = 0.02;
    if (p.key().find("wo") != std::string::npos || p.key().find("w_down") != std::string::npos) {
      std /= std::sqrt(2.0 * c.n_layers);
    }
    p.value().normal_(0.0, std);
  }
  // Biases (qwen2) start at zero.
  for (auto& p : named_parameters()) {
    if (p.key().size() >= 5 && p.key().compare(p.key().size() - 5, 5, ".bias") == 0)
      p.value().zero_();
  }
  // Tied: the head's weight shares the embedding's storage (one copy; loading either loads both).
  if (c.tied_embeddings) lm_head->weight.set_(embed->weight);
}

ForwardResult TransformerImpl::forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                                       KVCache* cache, const AttentionLayout& layout) {
  return forward_embeddings(embed(tokens), positions, cache, layout);
}

ForwardResult TransformerImpl::forward_embeddings(const torch::Tensor& x,
                                                  const torch::Tensor& positions, KVCache* cache,
                                                  const AttentionLayout& layout) {
  std::vector<torch::Tensor> taps;  // (B, T, C) each: the feature layers' outputs
  std::vector<int64_t> tap_layers = export_features_ ? feature_layers() : std::vector<int64_t>{};
  torch::Tensor hidden =
      norm(run_layers(layers, x, positions, cache, layout, tap_layers, &taps));  // (B, T, C)
  ForwardResult out{
      on_rows(hidden, layout.rows, [&](const torch::Tensor& y) { return linear(lm_head, y); }),
      hidden, torch::Tensor()};
  if (export_features_) {
    taps.push_back(hidden);
    out.features = torch::cat(taps, -1);  // (B, T, 3C)
  }
  return out;
}

std::vector<int64_t> TransformerImpl::feature_layers() const {
  int64_t l = config_.n_layers;
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, l - 1); };
  int64_t low = clamp(1), mid = clamp(l / 2 - 1);
  return {std::min(low, mid), std::max(low, mid)};
}

torch::Tensor TransformerImpl::run_layers(torch::nn::ModuleList& stack, const torch::Tensor& x,
                                          const torch::Tensor& positions, KVCache* cache,
                                          const AttentionLayout& layout,
                                          const std::vector<int64_t>& tap_layers,
                                          std::vector<torch::Tensor>* taps) {
  int64_t b = x.size(0), t = x.size(1);
  auto long_opts = torch::TensorOptions().dtype(torch::kInt64).device(x.device());
  TORCH_CHECK(!cache || (!layout.prefix && !layout.record),
              "a shared prefix is for forwards without a KV cache");
  // Without a cache the new tokens follow the shared prefix, if any (P positions, else 0).
  int64_t p = layout.prefix ? layout.prefix->length() : 0;
  torch::Tensor lengths = cache ? cache->lengths_tensor() : torch::full({b}, p, long_opts);
  // A static cache (CUDA graphs) spans every position; the mask hides the uncommitted ones.
  int64_t s = !cache ? p + t : cache->static_span() ? cache->max_seq() : cache->max_length() + t;
  torch::Tensor mask = attention_mask(lengths, t, s, layout, x.scalar_type());
  torch::Tensor h = x;
  for (size_t l = 0; l < stack->size(); ++l) {
    h = stack[l]->as<DecoderLayerImpl>()->forward(h, positions, rope_, mask, cache, int64_t(l),
                                                  layout);
    if (taps) {
      for (int64_t want : tap_layers)
        if (want == int64_t(l)) taps->push_back(h);  // (B, T, C)
    }
  }
  return h;
}

std::unique_ptr<KVCache> TransformerImpl::make_cache(int64_t max_batch, int64_t max_seq) const {
  const torch::Tensor& w = lm_head->weight;
  return std::make_unique<KVCache>(config_.n_layers, max_batch, config_.n_kv_heads, max_seq,
                                   config_.head_dim(), w.scalar_type(), w.device());
}

std::vector<torch::Tensor> trainable_parameters(const Transformer& model) {
  std::vector<torch::Tensor> out;
  for (const auto& p : model->named_parameters()) {
    if (model->config().tied_embeddings && p.key() == "lm_head.weight") continue;
    out.push_back(p.value());
  }
  return out;
}

void fold_tied_gradient(const Transformer& model) {
  if (!model->config().tied_embeddings) return;
  torch::NoGradGuard no_grad;
  torch::Tensor head = model->lm_head->weight, embed = model->embed->weight;  // (V, C) each
  if (!head.grad().defined()) return;
  if (embed.grad().defined()) {
    embed.mutable_grad().add_(head.grad());
  } else {
    embed.mutable_grad() = head.grad().clone();
  }
  head.mutable_grad() = torch::Tensor();
}

torch::Tensor sequential_positions(const torch::Tensor& start, int64_t t) {
  return start.view({-1, 1}) + torch::arange(t, start.options()).view({1, -1});
}

}  // namespace tlt::model
