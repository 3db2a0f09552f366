// Where a job's model comes from when spec.model.path is set, and the card tlt writes beside its
// own checkpoints so that they can be read back (and exported) without the job that wrote them.
//
// Kinds of path (spec.model.format auto|gguf|hf|tlt; auto looks at the path):
//   GGUF file                       pretrained weights (gguf)
//   Hugging Face directory          config.json + model.safetensors or shards (hf)
//   a config.json file              that architecture, randomly initialised: train from scratch
//                                   (hf; its tokenizer.json, when beside it, is the vocabulary)
//   tlt checkpoint                  a model.ckpt/policy.ckpt file, a TST checkpoint directory
//                                   (DIR/model.ckpt or DIR/tst/model.ckpt) or an RL one
//                                   (DIR/latest or DIR/tlt/latest names step-N, whose
//                                   policy.ckpt is read) (tlt)
// A tlt checkpoint's architecture is the model card (kModelCard, a Hugging Face config.json with
// a "tlt_tokenizer" key) in the checkpoint's directory or one of its two parents; without one,
// the loader (pretrained.h) recognises the built-in presets by their tensor shapes.
//
// Thread safety: pure functions (they read files).
#pragma once

#include <string>

#include "api/status.h"
#include "runtime/model/pretrained_config.h"

namespace tlt::model {

inline constexpr const char* kModelCard = "model.json";

enum class SourceKind { kGguf, kHf, kHfConfig, kTlt };

struct ModelSource {
  SourceKind kind = SourceKind::kGguf;
  std::string path;  // the GGUF file, HF directory, config.json, or the tlt checkpoint file
};

// Resolves `path` under `format` ("auto", "gguf", "hf", "tlt"); a leading "~/" is $HOME. NotFound
// when the path (or an RL directory's latest checkpoint) is missing; InvalidArgument naming the
// path and the format when they disagree (a directory without config.json is not hf; a file without
// the GGUF magic is not gguf) or when auto cannot tell.
StatusOr<ModelSource> resolve_model_source(const std::string& path, const std::string& format);

struct ModelCard {
  PretrainedConfig config;
  // The model's tokenizer: a tokenizer.json file, a Hugging Face directory or a GGUF file; "" when
  // it is not one of those (tlt's own sentencepiece BPE, the RL codec) or unknown.
  std::string tokenizer;
};

// The card's text (a config.json plus "tlt_tokenizer"), and back. InvalidArgument naming `path`
// as config_from_hf_json does.
std::string model_card_json(const ModelCard& card);
StatusOr<ModelCard> model_card_from_json(const std::string& text, const std::string& path);

// Writes `card` to DIR/model.json (through a temporary file and a rename). Unavailable when the
// directory cannot be written.
Status write_model_card(const std::string& dir, const ModelCard& card);

// The card of the tlt checkpoint file `checkpoint`: model.json in its directory, or in the parent
// or grandparent (an RL job's checkpoint.path above step-N/). NotFound when there is none.
StatusOr<ModelCard> find_model_card(const std::string& checkpoint);

// Where the source's own tokenizer is: the GGUF file (when it has tokenizer.ggml.model, else "";
// Corruption for a damaged file); the HF directory (NotFound naming
// DIR/tokenizer.json when missing); the config.json's directory when tokenizer.json is beside it,
// else ""; a tlt checkpoint's card's tokenizer ("" without a card or tokenizer).
StatusOr<std::string> model_tokenizer_source(const ModelSource& source);

// What identifies a model file in caches keyed by it (warm starts): its absolute path, size and
// modification time ("path:size:mtime"; a directory's own size 0 and mtime). Never fails: an
// unreadable path gives what could be read.
std::string model_identity(const std::string& path);

}  // namespace tlt::model
