// A pretrained policy's own tokenizer (runtime/tokenizer) behind the RL Codec interface
// (runtime/rl/text.h): prompts rendered through the model's chat template when it has one (ChatML
// for SmolLM2 and Qwen, Llama 3's layout), responses decoded up to the first of the model's end
// tokens with special tokens left out, and ids of the model's embedding that the tokenizer lacks
// (rows padded to a round number) dropped.
//
// Ownership: the codec owns its tokenizer. Thread safety: immutable after construction.
#pragma once

#include <memory>
#include <string>

#include "api/status.h"
#include "runtime/model/model_source.h"
#include "runtime/rl/text.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tlt::rl {

class ModelCodec : public Codec {
 public:
  // InvalidArgument when the tokenizer names no end token (generation could not stop) or has
  // more ids than the model's embedding rows (`model_vocab`).
  static StatusOr<std::unique_ptr<ModelCodec>> create(std::unique_ptr<tokenizer::Tokenizer> tok,
                                                      int64_t model_vocab);
  // The tokenizer of `source` (model::model_tokenizer_source, then tokenizer::load_tokenizer),
  // checked as create() does. InvalidArgument naming the path when the source carries no
  // tokenizer (a GGUF without tokenizer.ggml.*, a tlt checkpoint of the ASCII codec); the
  // loaders' errors otherwise.
  static StatusOr<std::unique_ptr<ModelCodec>> load(const model::ModelSource& source,
                                                    int64_t model_vocab);

  StatusOr<std::vector<int64_t>> encode(const std::string& text) const override;
  StatusOr<std::vector<int64_t>> encode_prompt(const std::string& plain_text,
                                               const std::string& chat_text) const override;
  StatusOr<std::vector<int64_t>> encode_messages(const std::vector<ChatTurn>& turns) const override;
  StatusOr<std::string> decode(const std::vector<int64_t>& ids) const override;
  StatusOr<std::string> render(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_; }
  const std::vector<int64_t>& end_ids() const override { return tok_->end_ids(); }
  bool has_chat() const override;

 private:
  ModelCodec(std::unique_ptr<tokenizer::Tokenizer> tok, int64_t vocab)
      : tok_(std::move(tok)), vocab_(vocab) {}
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  int64_t vocab_;  // the model's embedding rows (>= the tokenizer's ids)
};

}  // namespace tlt::rl
