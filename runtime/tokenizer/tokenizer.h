// A model's own tokenizer: text to token ids and back, its special tokens, the ids that end a
// generation, and how its chat prompts are laid out. One interface for every implementation
// (Hugging Face tokenizers through hf_tokenizer.h today; the RL codec can join later).
//
// Thread safety: implementations are immutable after construction; call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// The chat layouts tlt renders itself (no Jinja engine): recognised from the model's template.
struct ChatTemplate {
  enum class Kind { kNone, kChatMl, kLlama3 };
  Kind kind = Kind::kNone;
  // A system turn the template inserts when the conversation has none (SmolLM2: "You are a
  // helpful AI assistant named SmolLM, trained by Hugging Face"); empty for none.
  std::string default_system;

  // ChatML: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then "<|im_start|>assistant\n".
  // Llama 3: "<|begin_of_text|>" then "<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT
  // <|eot_id|>" per message, then the assistant's header. kNone: the contents joined by "\n".
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
};

// Recognises a model's Jinja chat template: ChatML (it contains "<|im_start|>"; a literal default
// system turn is taken from it) or Llama 3 ("<|start_header_id|>"). An empty template gives
// kNone. Unimplemented, quoting the start of the template, for any other.
StatusOr<ChatTemplate> chat_template_from_jinja(const std::string& jinja);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text` (UTF-8; invalid sequences count as U+FFFD). Special tokens' text
  // ("<|im_end|>") becomes their ids. Never adds a BOS token: see bos_id()/add_bos().
  virtual StatusOr<std::vector<int64_t>> encode(const std::string& text) const = 0;
  // Text of `ids`, leaving special tokens out when skip_special. InvalidArgument for an id out of
  // range.
  virtual StatusOr<std::string> decode(const std::vector<int64_t>& ids,
                                       bool skip_special) const = 0;
  // One past the largest id (added tokens included).
  virtual int64_t vocab_size() const = 0;
  // The id of a token's text, or -1.
  virtual int64_t token_id(const std::string& token) const = 0;

  int64_t bos_id() const { return bos_id_; }  // -1: none
  bool add_bos() const { return add_bos_; }   // whether plain prompts start with BOS
  const std::vector<int64_t>& end_ids() const { return end_ids_; }  // stop generating on these
  const ChatTemplate& chat_template() const { return chat_; }

  // The ids of a chat prompt: the template rendered with the assistant's opening, encoded (no
  // BOS added: templates that need one write it).
  StatusOr<std::vector<int64_t>> encode_chat(const std::vector<ChatMessage>& messages) const;
  // The ids of a plain prompt, with BOS first when add_bos().
  StatusOr<std::vector<int64_t>> encode_prompt(const std::string& text) const;
  // InvalidArgument when this tokenizer has more ids than the model's embedding has rows
  // (model_vocab): it belongs to another model.
  Status check_fits(int64_t model_vocab) const;

 protected:
  int64_t bos_id_ = -1;
  bool add_bos_ = false;
  std::vector<int64_t> end_ids_;
  ChatTemplate chat_;
};

}  // namespace tlt::tokenizer
