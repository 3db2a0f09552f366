// Decoder-only transformer of the Llama family: RMSNorm, RoPE, grouped-query attention, SwiGLU.
//
// The forward takes explicit positions and an optional tree mask, so the same code runs a
// prompt prefill, one decode step, a chain of drafted tokens, or a whole draft tree (each node
// at position length + depth, attending to its ancestors only). It returns the logits and the
// final hidden states (after the last norm), which the EAGLE drafter learns from.
// Shapes: see the legend in runtime/model/config.h.
//
// Thread safety: a module is used by one thread at a time.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "runtime/model/config.h"
#include "runtime/model/kv_cache.h"

namespace tlt::model {

// x * rsqrt(mean(x^2) + eps) * weight, computed in x's dtype.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);  // (..., C) -> (..., C)
  torch::Tensor weight;                           // (C)
 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

// cos/sin tables for rotary embeddings, gathered by position.
struct Rope {
  torch::Tensor cos, sin;  // (max_seq, D/2), float64 on the CPU
  Rope(const ModelConfig& c);
  // Rotates x (B, heads, T, D) by positions (B, T) on x's device.
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& positions) const;

 private:
  mutable torch::Tensor cos_on_device_, sin_on_device_;  // (max_seq, D/2) copies on x's device
};

// Keys and values of a prefix that several sequences share, one entry per layer, with their
// autograd history: a training forward runs the prefix once (AttentionLayout::record) and then
// every row of a batch attends to it (AttentionLayout::prefix), so a GRPO group's prompt costs one
// forward and one backward instead of one per sample; the rows' gradients sum into it.
// k[l], v[l]: (1, Hkv, P, D), the keys after RoPE at positions 0..P-1.
struct SharedPrefix {
  std::vector<torch::Tensor> k, v;
  int64_t length() const { return k.empty() ? 0 : k.front().size(2); }
};

// Who attends to whom in one forward. New token t of slot b is written at cache position
// lengths[b] + t. It sees the committed prefix, and the new tokens t' with tree[b, t, t'].
// When spec_base is set, cache positions [spec_base[b], lengths[b]) hold speculative tokens
// committed by earlier forwards of the same draft (a drafter growing a tree level by level);
// token t sees speculative position spec_base[b] + p only if spec_visible[b, t, p].
struct AttentionLayout {
  torch::Tensor tree;          // (B, T, T) bool; undefined = causal (lower-triangular)
  torch::Tensor spec_base;     // (B,) int64; undefined = no speculative prefix
  torch::Tensor spec_visible;  // (B, T, P) bool, P = max(lengths - spec_base) >= 1
  // (R) int64 flat indices b * T + t of the real tokens when a batch is padded; undefined = all.
  // The linear layers and the LM head then run on those R rows only (padding costs attention
  // and norms, no matmuls) and leave zeros in the padding rows' outputs, logits included.
  torch::Tensor rows;
  // Forwards without a cache only (training, scoring). prefix: the new tokens (at positions from
  // prefix->length() on) see the prefix's keys and values before their own, every row the same
  // ones. record: each layer appends its new keys and values (a prefix's own forward, batch 1).
  const SharedPrefix* prefix = nullptr;
  SharedPrefix* record = nullptr;
};

// f applied to the rows of x (B, T, C) listed in `rows` (see AttentionLayout::rows), scattered
// back to (B, T, C') with zeros elsewhere; f(x) when rows is undefined.
torch::Tensor on_rows(const torch::Tensor& x, const torch::Tensor& rows,
                      const std::function<torch::Tensor(const torch::Tensor&)>& f);

// Additive attention mask (B, 1, 1, T, S): 0 where allowed, -inf elsewhere (see AttentionLayout).
torch::Tensor attention_mask(const torch::Tensor& lengths, int64_t t, int64_t s,
                             const AttentionLayout& layout, torch::Dtype dtype);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& c);
  // x (B, T, C), mask (B, 1, 1, T, S). With a cache, writes this layer's new K/V into it and
  // attends over the first S cached positions; without, K/V are layout.prefix's (S - T of them)
  // followed by the new ones. layout: its rows, prefix and record (see AttentionLayout).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, const Rope& rope,
                        const torch::Tensor& mask, KVCache* cache, int64_t layer,
                        const AttentionLayout& layout = {});
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  // wq (H*D, C), wk/wv (Hkv*D, C), wo (C, H*D); with ModelConfig::qkv_bias, biases (H*D), (Hkv*D)
 private:
  int64_t n_heads_, n_kv_heads_, head_dim_;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x);                      // (B, T, C) -> (B, T, C)
  torch::nn::Linear w_gate{nullptr}, w_up{nullptr}, w_down{nullptr};  // (F, C), (F, C), (C, F)
};
TORCH_MODULE(Mlp);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, const Rope& rope,
                        const torch::Tensor& mask, KVCache* cache, int64_t layer,
                        const AttentionLayout& layout = {});
  RMSNorm attn_norm{nullptr}, mlp_norm{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

struct ForwardResult {
  torch::Tensor logits;  // (B, T, V)
  torch::Tensor hidden;  // (B, T, C), after the final norm
  // (B, T, 3C) when the model exports fused features (TransformerImpl::set_export_features):
  // the outputs of layers feature_layers() (low, middle; the residual stream, before any norm)
  // and `hidden` last, concatenated in that order, so the last C columns always equal `hidden`.
  // Undefined otherwise. Computed from the same forward: no extra layer runs.
  torch::Tensor features;
  // What a drafter reads at each position: `features` when defined, else `hidden`.
  const torch::Tensor& drafter_features() const { return features.defined() ? features : hidden; }
};

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const ModelConfig& c);

  // tokens, positions: (B, T) int64. cache: nullptr for a stand-alone causal forward (training),
  // else the layer caches are read and written (see KVCache). layout: see AttentionLayout.
  ForwardResult forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                        KVCache* cache = nullptr, const AttentionLayout& layout = {});
  // Same, from input embeddings (B, T, C) instead of tokens (used by superposition training).
  ForwardResult forward_embeddings(const torch::Tensor& x, const torch::Tensor& positions,
                                   KVCache* cache = nullptr, const AttentionLayout& layout = {});
  // Runs the decoder layers on x (B, T, C) and returns the last layer's output (before the final
  // norm). Shared with the drafter, whose layers are DecoderLayers too. With `taps`, the outputs
  // of the layers listed in `tap_layers` (0-based, ascending; a layer listed twice is appended
  // twice) are appended to it.
  torch::Tensor run_layers(torch::nn::ModuleList& stack, const torch::Tensor& x,
                           const torch::Tensor& positions, KVCache* cache,
                           const AttentionLayout& layout,
                           const std::vector<int64_t>& tap_layers = {},
                           std::vector<torch::Tensor>* taps = nullptr);

  // EAGLE-3-style fused features: when on, every forward also returns ForwardResult::features,
  // the low and middle layers' outputs (feature_layers()) and the final hidden state, at the
  // cost of one concatenation. Off by default: results and numerics are then as without it.
  // A fused drafter turns it on for its target (model::DrafterImpl).
  void set_export_features(bool on) { export_features_ = on; }
  bool export_features() const { return export_features_; }
  // The width of ForwardResult::drafter_features(): 3C when exporting fused features, else C.
  int64_t feature_width() const { return export_features_ ? 3 * config_.dim : config_.dim; }
  // The two layers whose outputs precede the final hidden state in the fused features, ascending:
  // layer 1 (the second; a low layer past the embedding's lexical features) and layer L/2 - 1
  // (the middle), each clamped to [0, L-1]. The high feature is the final hidden state itself,
  // which keeps a `last` drafter's input a slice of the fused one.
  std::vector<int64_t> feature_layers() const;

  // A cache sized for this model.
  std::unique_ptr<KVCache> make_cache(int64_t max_batch, int64_t max_seq) const;

  const ModelConfig& config() const { return config_; }
  const Rope& rope() const { return rope_; }
  torch::nn::Embedding embed{nullptr};  // (V, C)
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  // (V, C); with ModelConfig::tied_embeddings its weight shares embed's storage (two parameter
  // tensors, one copy of the numbers).
  torch::nn::Linear lm_head{nullptr};

 private:
  ModelConfig config_;
  Rope rope_;
  bool export_features_ = false;
};
TORCH_MODULE(Transformer);

// Training a model whose LM head is tied to its embedding (ModelConfig::tied_embeddings): the head
// shares the embedding's storage but is a parameter tensor of its own with its own gradient. An
// optimizer given both would step the shared matrix twice (AdamW's moments counted twice). So
// an optimizer takes trainable_parameters() (every parameter but a tied LM head) and, after each
// backward, fold_tied_gradient() adds the head's gradient to the embedding's and clears it: the
// shared matrix takes one step on the sum, as in transformers. Both are no-ops when untied.
std::vector<torch::Tensor> trainable_parameters(const Transformer& model);
void fold_tied_gradient(const Transformer& model);

// Positions (B, T) = start[b] + arange(T): what a chain or a prefill needs.
torch::Tensor sequential_positions(const torch::Tensor& start, int64_t t);

}  // namespace tlt::model
