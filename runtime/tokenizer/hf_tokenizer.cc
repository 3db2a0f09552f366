#include "runtime/tokenizer/hf_tokenizer.h"

#include <cstddef>

extern "C" {
// runtime/tokenizer/src/lib.rs
TltTokenizer* tlt_tok_from_json(const uint8_t* json, size_t len, char** error, size_t* error_len);
void tlt_tok_free(TltTokenizer* t);
void tlt_tok_free_bytes(char* p, size_t len);
void tlt_tok_free_ids(uint32_t* p, size_t len);
int32_t tlt_tok_encode(const TltTokenizer* t, const uint8_t* text, size_t len, bool add_special,
                       uint32_t** ids, size_t* n_ids, char** error, size_t* error_len);
int32_t tlt_tok_decode(const TltTokenizer* t, const uint32_t* ids, size_t n_ids, bool skip_special,
                       char** text, size_t* text_len, char** error, size_t* error_len);
int64_t tlt_tok_token_to_id(const TltTokenizer* t, const uint8_t* token, size_t len);
bool tlt_tok_is_special(const TltTokenizer* t, uint32_t id);
size_t tlt_tok_vocab_size(const TltTokenizer* t);
}

namespace tlt::tokenizer {
namespace {

// Takes ownership of a (pointer, length) string the crate returned.
std::string take_bytes(char* p, size_t len) {
  std::string s = p ? std::string(p, len) : std::string();
  tlt_tok_free_bytes(p, len);
  return s;
}

}  // namespace

HfTokenizer::HfTokenizer(TltTokenizer* handle)
    : handle_(handle), vocab_size_(int64_t(tlt_tok_vocab_size(handle))) {}

HfTokenizer::~HfTokenizer() {
  tlt_tok_free(handle_);
}

StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::from_json(const std::string& json,
                                                              const std::string& label) {
  char* error = nullptr;
  size_t error_len = 0;
  TltTokenizer* t = tlt_tok_from_json(reinterpret_cast<const uint8_t*>(json.data()), json.size(),
                                      &error, &error_len);
  if (t == nullptr) {
    return Status::InvalidArgument(label + ": not a tokenizer.json the tokenizers library reads: " +
                                   take_bytes(error, error_len));
  }
  return std::unique_ptr<HfTokenizer>(new HfTokenizer(t));
}

StatusOr<std::vector<int64_t>> HfTokenizer::encode(const std::string& text) const {
  uint32_t* ids = nullptr;
  size_t n = 0;
  char* error = nullptr;
  size_t error_len = 0;
  if (tlt_tok_encode(handle_, reinterpret_cast<const uint8_t*>(text.data()), text.size(),
                     /*add_special=*/false, &ids, &n, &error, &error_len) != 0) {
    return Status::InvalidArgument("tokenizer: " + take_bytes(error, error_len));
  }
  std::vector<int64_t> out(ids, ids + n);
  tlt_tok_free_ids(ids, n);
  return out;
}

StatusOr<std::string> HfTokenizer::decode(const std::vector<int64_t>& ids,
                                          bool skip_special) const {
  std::vector<uint32_t> u;
  u.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return Status::InvalidArgument("tokenizer: id " + std::to_string(id) +
                                     " is outside the vocabulary of " +
                                     std::to_string(vocab_size()));
    }
    u.push_back(uint32_t(id));
  }
  char* text = nullptr;
  size_t len = 0;
  char* error = nullptr;
  size_t error_len = 0;
  if (tlt_tok_decode(handle_, u.data(), u.size(), skip_special, &text, &len, &error, &error_len) !=
      0) {
    return Status::InvalidArgument("tokenizer: " + take_bytes(error, error_len));
  }
  return take_bytes(text, len);
}

int64_t HfTokenizer::vocab_size() const {
  return vocab_size_;
}

int64_t HfTokenizer::token_id(const std::string& token) const {
  return tlt_tok_token_to_id(handle_, reinterpret_cast<const uint8_t*>(token.data()), token.size());
}

bool HfTokenizer::is_special(int64_t id) const {
  return id >= 0 && tlt_tok_is_special(handle_, uint32_t(id));
}

void HfTokenizer::set_special(int64_t bos_id, bool add_bos, std::vector<int64_t> end_ids,
                              ChatTemplate chat) {
  bos_id_ = bos_id;
  add_bos_ = add_bos && bos_id >= 0;
  end_ids_ = std::move(end_ids);
  chat_ = std::move(chat);
}

StatusOr<std::vector<int64_t>> Tokenizer::encode_chat(
    const std::vector<ChatMessage>& messages) const {
  return encode(chat_.render(messages, /*add_generation_prompt=*/true));
}

StatusOr<std::vector<int64_t>> Tokenizer::encode_prompt(const std::string& text) const {
  StatusOr<std::vector<int64_t>> ids = encode(text);
  if (!ids.ok() || !add_bos_) return ids;
  ids->insert(ids->begin(), bos_id_);
  return ids;
}

Status Tokenizer::check_fits(int64_t model_vocab) const {
  if (vocab_size() <= model_vocab) return Status::Ok();
  return Status::InvalidArgument("the tokenizer's vocabulary (" + std::to_string(vocab_size()) +
                                 " tokens) is larger than the model's embedding (" +
                                 std::to_string(model_vocab) +
                                 " rows): the tokenizer belongs to another model");
}

}  // namespace tlt::tokenizer
