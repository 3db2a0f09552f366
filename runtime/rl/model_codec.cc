#include "runtime/rl/model_codec.h"

#include <algorithm>

#include "runtime/tokenizer/hf_tokenizer.h"

namespace tlt::rl {

StatusOr<std::unique_ptr<ModelCodec>> ModelCodec::create(std::unique_ptr<tokenizer::Tokenizer> tok,
                                                         int64_t model_vocab) {
  if (tok->end_ids().empty())
    return Status::InvalidArgument(
        "the model's tokenizer names no end token (no EOS, no <|im_end|> or <|endoftext|>), so a "
        "response could not stop: set eos_token in its tokenizer_config.json");
  if (Status fits = tok->check_fits(model_vocab); !fits.ok()) return fits;
  return std::unique_ptr<ModelCodec>(new ModelCodec(std::move(tok), model_vocab));
}

StatusOr<std::unique_ptr<ModelCodec>> ModelCodec::load(const model::ModelSource& source,
                                                       int64_t model_vocab) {
  StatusOr<std::string> where = model::model_tokenizer_source(source);
  if (!where.ok()) return where.status();
  if (where->empty())
    return Status::InvalidArgument(
        source.path +
        " carries no tokenizer an RLJob can use (a GGUF without tokenizer.ggml.* metadata, or a "
        "tlt checkpoint of a preset): point it at a Hugging Face directory with tokenizer.json or "
        "a GGUF that embeds its vocabulary");
  StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::load_tokenizer(*where);
  if (!tok.ok()) return tok.status();
  return create(std::move(*tok), model_vocab);
}

StatusOr<std::vector<int64_t>> ModelCodec::encode(const std::string& text) const {
  return tok_->encode(text);
}

StatusOr<std::vector<int64_t>> ModelCodec::encode_prompt(const std::string& plain_text,
                                                         const std::string& chat_text) const {
  if (has_chat()) return tok_->encode_chat({{"user", chat_text}});
  return tok_->encode_prompt(plain_text);
}

StatusOr<std::vector<int64_t>> ModelCodec::encode_messages(
    const std::vector<ChatTurn>& turns) const {
  if (!has_chat()) return Codec::encode_messages(turns);
  std::vector<tokenizer::ChatMessage> messages;
  for (const ChatTurn& t : turns) messages.push_back({t.role, t.content});
  return tok_->encode_chat(messages);
}

StatusOr<std::string> ModelCodec::decode(const std::vector<int64_t>& ids) const {
  const std::vector<int64_t>& ends = tok_->end_ids();
  auto end = std::find_if(ids.begin(), ids.end(), [&ends](int64_t id) {
    return std::find(ends.begin(), ends.end(), id) != ends.end();
  });
  std::vector<int64_t> known;  // the model may sample rows the tokenizer lacks (padding)
  for (auto it = ids.begin(); it != end; ++it) {
    if (*it < 0 || *it >= vocab_)
      return Status::InvalidArgument("token id " + std::to_string(*it) +
                                     " is outside the model's " + std::to_string(vocab_) + " ids");
    if (*it < tok_->vocab_size()) known.push_back(*it);
  }
  return tok_->decode(known, /*skip_special=*/true);
}

StatusOr<std::string> ModelCodec::render(const std::vector<int64_t>& ids) const {
  std::vector<int64_t> known;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_)
      return Status::InvalidArgument("token id " + std::to_string(id) + " is outside the model's " +
                                     std::to_string(vocab_) + " ids");
    if (id < tok_->vocab_size()) known.push_back(id);
  }
  return tok_->decode(known, /*skip_special=*/false);
}

bool ModelCodec::has_chat() const {
  return tok_->chat_template().kind != tokenizer::ChatTemplate::Kind::kNone;
}

}  // namespace tlt::rl
