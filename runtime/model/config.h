// Architecture of a decoder-only transformer of the Llama family, and the built-in presets.
//
// Shape legend used across runtime/model and runtime/rollout:
//   B batch (active requests), T new tokens in a forward, S attended positions (cache + new),
//   C model width (dim), H query heads, Hkv key/value heads, G = H / Hkv, D head dim (C / H),
//   F feed-forward width, V vocabulary, L layers.
#pragma once

#include <cstdint>
#include <string>

#include "api/status.h"

namespace tlt::model {

struct ModelConfig {
  int64_t vocab = 4096;    // V
  int64_t dim = 192;       // C
  int64_t n_layers = 4;    // L
  int64_t n_heads = 6;     // H
  int64_t n_kv_heads = 2;  // Hkv; H must be a multiple (grouped-query attention)
  int64_t ffn = 512;       // F, SwiGLU hidden width
  int64_t max_seq = 1024;  // longest sequence RoPE tables and caches are sized for
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  // Pretrained checkpoints (runtime/model/pretrained.h) may set these; the presets never do.
  int64_t n_head_dim = 0;        // D when a checkpoint says so (head_dim); 0: C / H
  bool qkv_bias = false;         // biases on the Q, K and V projections (qwen2)
  bool tied_embeddings = false;  // the LM head is the embedding matrix (SmolLM2, Qwen2-0.5B)

  int64_t head_dim() const { return n_head_dim > 0 ? n_head_dim : dim / n_heads; }
  // Parameters of the model with an untied LM head (QKV biases included when set).
  int64_t parameter_count() const;
  // InvalidArgument naming the field when the shape is inconsistent (e.g. dim % n_heads != 0).
  Status validate() const;
};

// "tiny" (~3M parameters with V=4096; tests) or "small" (~28M; benchmarks). `vocab` overrides
// the preset's vocabulary when > 0. NotFound for an unknown name.
StatusOr<ModelConfig> preset_config(const std::string& name, int64_t vocab = 0);

}  // namespace tlt::model
