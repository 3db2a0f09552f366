// ChatTemplate: the two chat layouts tlt renders, recognised from a model's Jinja template.
#include "runtime/tokenizer/tokenizer.h"

namespace tlt::tokenizer {
namespace {

// The text of a literal system turn in a ChatML template, e.g. SmolLM2's
//   {{ '<|im_start|>system\nYou are a helpful AI assistant ...<|im_end|>\n' }}
// where "\n" is either a newline or the two characters backslash, n. Empty when there is none.
std::string literal_system_turn(const std::string& jinja) {
  const std::string open = "<|im_start|>system";
  size_t at = jinja.find(open);
  while (at != std::string::npos) {
    size_t body = at + open.size();
    if (jinja.compare(body, 2, "\\n") == 0) {
      body += 2;
    } else if (jinja.compare(body, 1, "\n") == 0) {
      body += 1;
    } else {
      at = jinja.find(open, at + 1);  // "<|im_start|>system' + ..." is not literal text
      continue;
    }
    size_t end = jinja.find("<|im_end|>", body);
    if (end == std::string::npos) return "";
    std::string text = jinja.substr(body, end - body);
    if (text.find_first_of("{}'\"+") != std::string::npos) return "";  // an expression, not text
    return text;
  }
  return "";
}

}  // namespace

StatusOr<ChatTemplate> chat_template_from_jinja(const std::string& jinja) {
  ChatTemplate t;
  if (jinja.empty()) return t;
  if (jinja.find("<|im_start|>") != std::string::npos) {
    t.kind = ChatTemplate::Kind::kChatMl;
    t.default_system = literal_system_turn(jinja);
    return t;
  }
  if (jinja.find("<|start_header_id|>") != std::string::npos) {
    t.kind = ChatTemplate::Kind::kLlama3;
    return t;
  }
  return Status::Unimplemented("chat template \"" + jinja.substr(0, 60) +
                               "...\" is neither ChatML nor Llama 3, the layouts tlt renders");
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt) const {
  bool has_system = !messages.empty() && messages.front().role == "system";
  std::string out;
  switch (kind) {
    case Kind::kChatMl:
      if (!has_system && !default_system.empty()) {
        out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
      }
      for (const ChatMessage& m : messages) {
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      }
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case Kind::kLlama3:
      out = "<|begin_of_text|>";
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case Kind::kNone:
      break;
  }
  for (size_t i = 0; i < messages.size(); ++i) out += (i ? "\n" : "") + messages[i].content;
  return out;
}

}  // namespace tlt::tokenizer
