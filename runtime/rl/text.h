// The RL policy's tokenizer interface (Codec), and its built-in implementation: the 128-symbol
// ASCII codec the presets use (one token per ASCII character, id 0 is end-of-sequence).
//
// The generated tasks (runtime/rl/tasks.h) are plain ASCII arithmetic, so a 128-token
// vocabulary covers them exactly and keeps the tiny policy small (its LM head is V x C). Bytes
// outside 1..127 encode as '?'; decoding stops at the first end-of-sequence token. A pretrained
// model (spec.model.path) reads and writes through its own tokenizer instead
// (runtime/rl/model_codec.h), with its chat template and its end tokens.
//
// Thread safety: pure functions; codecs are immutable after construction (call from any thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::rl {

// One turn of a prompt given as chat messages (a dataset row's message list).
struct ChatTurn {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

inline constexpr int64_t kTextVocab = 128;
inline constexpr int64_t kEndOfText = 0;

inline std::vector<int64_t> encode_text(const std::string& s) {
  std::vector<int64_t> ids;
  ids.reserve(s.size());
  for (unsigned char c : s) ids.push_back(c >= 1 && c < kTextVocab ? int64_t(c) : int64_t('?'));
  return ids;
}

inline std::string decode_text(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    if (id == kEndOfText) break;
    s.push_back(id > 0 && id < kTextVocab ? char(id) : '?');
  }
  return s;
}

// Text to token ids and back for an RL policy: prompts, worked solutions and responses.
class Codec {
 public:
  virtual ~Codec() = default;
  // Ids of `text` (no BOS, no end token). InvalidArgument when the tokenizer refuses it.
  virtual StatusOr<std::vector<int64_t>> encode(const std::string& text) const = 0;
  // Ids of a prompt as the policy reads it. With a chat template (has_chat()): `chat_text` as one
  // user turn (after the template's default system turn, if any), then the assistant's opening.
  // Without: `plain_text`, BOS first when the tokenizer adds one. Errors as encode.
  virtual StatusOr<std::vector<int64_t>> encode_prompt(const std::string& plain_text,
                                                       const std::string& chat_text) const = 0;
  // Ids of a prompt given as chat messages, rendered as they are by the chat template (its default
  // system turn when they have none, as encode_prompt), then the assistant's opening. Without a
  // chat template: the contents joined by newlines, read as encode_prompt reads a plain prompt.
  // Errors as encode.
  virtual StatusOr<std::vector<int64_t>> encode_messages(const std::vector<ChatTurn>& turns) const {
    std::string joined;
    for (const ChatTurn& t : turns) joined += (joined.empty() ? "" : "\n") + t.content;
    return encode_prompt(joined, joined);
  }
  // Text of a response: the ids up to the first end id (excluded), special tokens left out.
  // InvalidArgument for an id outside [0, vocab_size()).
  virtual StatusOr<std::string> decode(const std::vector<int64_t>& ids) const = 0;
  // Text of a prompt's ids as the policy reads them: every id, the chat template's special tokens
  // (and end tokens) kept as their text. Default: decode(). Errors as decode.
  virtual StatusOr<std::string> render(const std::vector<int64_t>& ids) const {
    return decode(ids);
  }
  // One past the largest id.
  virtual int64_t vocab_size() const = 0;
  // Generation stops on any of these (never empty); the first is appended to worked solutions.
  virtual const std::vector<int64_t>& end_ids() const = 0;
  // Whether prompts are rendered through a chat template.
  virtual bool has_chat() const = 0;
};

// The ASCII codec above behind the interface: encode_text / decode_text, end id kEndOfText,
// vocabulary kTextVocab, no chat template (prompts are the plain text). Never fails.
class AsciiCodec : public Codec {
 public:
  StatusOr<std::vector<int64_t>> encode(const std::string& text) const override {
    return encode_text(text);
  }
  StatusOr<std::vector<int64_t>> encode_prompt(const std::string& plain_text,
                                               const std::string&) const override {
    return encode_text(plain_text);
  }
  StatusOr<std::string> decode(const std::vector<int64_t>& ids) const override {
    return decode_text(ids);
  }
  int64_t vocab_size() const override { return kTextVocab; }
  const std::vector<int64_t>& end_ids() const override { return end_; }
  bool has_chat() const override { return false; }

 private:
  std::vector<int64_t> end_{kEndOfText};
};

// The shared ASCII codec (for callers that take a `const Codec*` defaulting to it).
inline const Codec& ascii_codec() {
  static const AsciiCodec codec;
  return codec;
}

}  // namespace tlt::rl
