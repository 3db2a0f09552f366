// Hugging Face's `tokenizers` (the Rust crate, through the C ABI of runtime/tokenizer/src/lib.rs)
// behind the Tokenizer interface, and the loaders of a model's tokenizer: from a Hugging Face
// directory (tokenizer.json, tokenizer_config.json, generation_config.json) or from a GGUF file's
// embedded vocabulary, merges and special tokens (turned into the equivalent tokenizer.json).
//
// Ownership: loaders return a unique_ptr the caller owns. Thread safety: see tokenizer.h.
#pragma once

#include <memory>
#include <string>

#include "runtime/model/gguf.h"
#include "runtime/tokenizer/tokenizer.h"

struct TltTokenizer;

namespace tlt::tokenizer {

class HfTokenizer : public Tokenizer {
 public:
  ~HfTokenizer() override;
  HfTokenizer(const HfTokenizer&) = delete;
  HfTokenizer& operator=(const HfTokenizer&) = delete;

  // Parses a tokenizer.json document. InvalidArgument naming `label` when the crate refuses it.
  static StatusOr<std::unique_ptr<HfTokenizer>> from_json(const std::string& json,
                                                          const std::string& label);

  StatusOr<std::vector<int64_t>> encode(const std::string& text) const override;
  StatusOr<std::string> decode(const std::vector<int64_t>& ids, bool skip_special) const override;
  int64_t vocab_size() const override;
  int64_t token_id(const std::string& token) const override;
  bool is_special(int64_t id) const;

  // Special tokens and chat layout, as the loaders find them beside the vocabulary.
  void set_special(int64_t bos_id, bool add_bos, std::vector<int64_t> end_ids, ChatTemplate chat);

 private:
  explicit HfTokenizer(TltTokenizer* handle);
  TltTokenizer* handle_;  // owned
  // The crate counts its vocabulary by building a map of every token (~5 ms for SmolLM2's 49k);
  // decode() checks every id against it, so it is counted once here.
  int64_t vocab_size_;
};

// The tokenizer.json equivalent of a GGUF file's tokenizer.ggml.* metadata (BPE "gpt2" models;
// pre-tokenizers smollm, gpt2/default, qwen2 and llama-bpe). Unimplemented naming the model or
// pre-tokenizer for others (SentencePiece "llama" vocabularies among them); InvalidArgument
// naming the key when the metadata is incomplete.
StatusOr<std::string> tokenizer_json_from_gguf(const model::GgufFile& file);

// The tokenizer of the model at `path`: a GGUF file, a Hugging Face directory (NotFound naming
// DIR/tokenizer.json when it is missing), a tokenizer.json file (any name ending in .json but
// config.json; special tokens from the tokenizer_config.json beside it), or a config.json (the
// tokenizer.json beside it). End ids: the model's EOS id(s) plus the
// end-of-turn tokens of its vocabulary (<|im_end|>, <|eot_id|>, <|endoftext|>, ...).
StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path);

}  // namespace tlt::tokenizer
