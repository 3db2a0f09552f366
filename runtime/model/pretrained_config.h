// The architecture of a pretrained checkpoint, read from a Hugging Face config.json or from a GGUF
// file's metadata, as a ModelConfig plus what the loader needs to know.
//
// Supported architectures: "llama" (Llama 2 and 3, SmolLM2, TinyLlama) and "qwen2" (Q/K/V biases).
// Anything else is InvalidArgument naming the architecture; so are features the transformer does
// not implement (rope_scaling, an activation other than SiLU, output-projection biases).
// max_seq is the checkpoint's context length capped at kMaxPretrainedSeq (RoPE tables and caches
// are sized by it; longer contexts are the caller's to ask for).
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "api/status.h"
#include "runtime/model/config.h"
#include "runtime/model/gguf.h"

namespace tlt::model {

inline constexpr int64_t kMaxPretrainedSeq = 8192;

struct PretrainedConfig {
  std::string architecture;  // "llama" or "qwen2"
  ModelConfig config;
};

// From the text of a config.json (`path` labels messages). InvalidArgument naming the file and
// the field when a required field is missing or has the wrong type, or the model is unsupported.
StatusOr<PretrainedConfig> config_from_hf_json(const std::string& json_text,
                                               const std::string& path);

// From a GGUF file's metadata and tensor table (tied embeddings: no output.weight; qkv_bias:
// blk.0.attn_q.bias exists). Errors name the file and the key.
StatusOr<PretrainedConfig> config_from_gguf(const GgufFile& file);

// The config.json Hugging Face writes for `c` (LlamaForCausalLM or Qwen2ForCausalLM, float32):
// config_from_hf_json reads it back to the same config. head_dim is written only when it is not
// C / H (transformers 4.40 derives it; later versions read it).
std::string hf_config_json(const PretrainedConfig& c);

}  // namespace tlt::model
