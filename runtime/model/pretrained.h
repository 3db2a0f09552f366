// Loads a pretrained llama or qwen2 model into our Transformer, from a GGUF file (llama.cpp's
// format, any of the types in gguf_quant.h) or a Hugging Face directory (config.json with
// model.safetensors, or shards listed in model.safetensors.index.json; F32, F16 or BF16).
//
// Weights are dequantised or converted straight from the memory-mapped file into the model's
// float32 parameters: no second copy of the model. GGUF files of the llama architecture store
// the Q and K projections with their rows permuted for llama.cpp's interleaved RoPE
// (convert_hf_to_gguf.py: per head, rows [2, D/2] -> [D/2, 2]); the loader undoes it, since our
// RoPE rotates the two halves of a head (as Hugging Face's does). qwen2 files are not permuted.
//
// Nothing is half-loaded: every tensor's presence and shape is checked before the model is
// built, and on any error no model is returned.
//
// Thread safety: functions; the returned model is the caller's.
#pragma once

#include <torch/torch.h>

#include <string>

#include "api/status.h"
#include "runtime/model/model_source.h"
#include "runtime/model/pretrained_config.h"
#include "runtime/model/transformer.h"

namespace tlt::model {

enum class PretrainedFormat { kGguf, kHf };

// kGguf for a file whose first bytes are "GGUF", kHf for a directory with config.json;
// NotFound when `path` does not exist; InvalidArgument naming it otherwise.
StatusOr<PretrainedFormat> detect_pretrained_format(const std::string& path);

struct PretrainedModel {
  Transformer model{nullptr};  // float32, on the CPU, in eval mode
  PretrainedConfig config;
  PretrainedFormat format = PretrainedFormat::kGguf;
};

// Loads `path` (format detected). NotFound for a missing file; Corruption for a damaged one;
// InvalidArgument for an unsupported architecture or type, or a tensor of the wrong shape or
// missing. Every message names the file and the field or tensor.
StatusOr<PretrainedModel> load_pretrained(const std::string& path);

// The Hugging Face name of one of our parameters ("layers.3.attn.wq.weight" ->
// "model.layers.3.self_attn.q_proj.weight"); "" for a name that is not a Transformer's.
std::string hf_tensor_name(const std::string& ours);

struct SourcedModel {
  Transformer model{nullptr};  // float32, on the CPU, in eval mode
  ModelCard card;              // architecture, config and the tokenizer's source ("" if unknown)
  bool pretrained = true;      // false: a config.json's architecture with fresh weights
};

// The model of any source (model_source.h). kHfConfig builds the architecture with LibTorch's
// default initialisation (seed it with torch::manual_seed first). kTlt reads the card beside the
// checkpoint, or without one recognises a built-in preset (micro, tiny, small) by its tensor
// shapes. Errors as load_pretrained and load_checkpoint; InvalidArgument naming the checkpoint
// when it has no card and matches no preset.
StatusOr<SourcedModel> load_model(const ModelSource& source);

}  // namespace tlt::model
