// load_tokenizer and tokenizer_json_from_gguf (see hf_tokenizer.h).
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/hf_tokenizer.h"

namespace tlt::tokenizer {
namespace {

using nlohmann::json;

// The split regexes of Hugging Face's Qwen2 and Llama 3 tokenizer.json files (and llama.cpp's
// "qwen2" / "llama-bpe" pre-tokenizers).
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// End-of-turn tokens of common vocabularies; generation stops on those a vocabulary has.
const char* const kEndTokens[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>",
                                  "</s>"};

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

json split_then_byte_level(const char* regex) {
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", regex}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", {split, byte_level(false)}}};
}

// The pre-tokenizer that llama.cpp's `tokenizer.ggml.pre` names.
StatusOr<json> pre_tokenizer(const std::string& path, const std::string& pre) {
  if (pre == "smollm") {
    json digits = {{"type", "Digits"}, {"individual_digits", true}};
    return json{{"type", "Sequence"}, {"pretokenizers", {digits, byte_level(true)}}};
  }
  if (pre == "gpt2" || pre == "default" || pre.empty()) return byte_level(true);
  if (pre == "qwen2") return split_then_byte_level(kQwen2Split);
  if (pre == "llama-bpe" || pre == "llama3") return split_then_byte_level(kLlama3Split);
  return Status::Unimplemented(path + ": tokenizer.ggml.pre \"" + pre +
                               "\" is not supported (smollm, gpt2, default, qwen2, llama-bpe)");
}

Status missing(const model::GgufFile& f, const std::string& key, const std::string& why) {
  return Status::InvalidArgument(f.path + ": " + key + " " + why);
}

}  // namespace

StatusOr<std::string> tokenizer_json_from_gguf(const model::GgufFile& f) {
  StatusOr<std::string> kind = f.get_string("tokenizer.ggml.model");
  if (!kind.ok()) return kind.status();
  if (*kind != "gpt2") {
    return Status::Unimplemented(f.path + ": tokenizer.ggml.model \"" + *kind +
                                 "\" is not supported (gpt2, the byte-level BPE); use the "
                                 "model's Hugging Face directory with its tokenizer.json");
  }
  const model::GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  const model::GgufValue* merges = f.find("tokenizer.ggml.merges");
  const model::GgufValue* types = f.find("tokenizer.ggml.token_type");
  if (tokens == nullptr || tokens->strings.empty() ||
      tokens->strings.size() != tokens->n_elements) {
    return missing(f, "tokenizer.ggml.tokens", "is missing or not an array of strings");
  }
  if (merges == nullptr || merges->strings.size() != merges->n_elements) {
    return missing(f, "tokenizer.ggml.merges", "is missing or not an array of strings");
  }
  if (types != nullptr && types->numbers.size() != tokens->strings.size()) {
    return missing(f, "tokenizer.ggml.token_type", "has another length than the tokens");
  }
  std::string pre_name;
  if (f.find("tokenizer.ggml.pre")) pre_name = f.get_string("tokenizer.ggml.pre").value();
  StatusOr<json> pre = pre_tokenizer(f.path, pre_name);
  if (!pre.ok()) return pre.status();
  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < tokens->strings.size(); ++id) {
    const std::string& t = tokens->strings[id];
    if (!vocab.contains(t)) vocab[t] = id;
    int type = types ? int(types->numbers[id]) : 1;  // 1 normal, 3 control, 4 user-defined
    if (type == 3 || type == 4) {
      added.push_back({{"id", id},
                       {"content", t},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", type == 4},
                       {"special", type == 3}});
    }
  }
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges->strings}};
  json doc = {{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", added},
              {"normalizer", nullptr},
              {"pre_tokenizer", *pre},
              {"post_processor", byte_level(false)},
              {"decoder", byte_level(true)},
              {"model", model}};
  if (pre_name == "qwen2") doc["normalizer"] = {{"type", "NFC"}};
  return doc.dump();
}

namespace {

// Adds the ids of the vocabulary's end-of-turn tokens to `ends` (kept unique, in order).
void add_end_tokens(const HfTokenizer& tok, std::vector<int64_t>* ends) {
  for (const char* t : kEndTokens) {
    int64_t id = tok.token_id(t);
    if (id >= 0) ends->push_back(id);
  }
  std::vector<int64_t> unique;
  for (int64_t id : *ends) {
    bool seen = false;
    for (int64_t u : unique) seen = seen || u == id;
    if (!seen && id >= 0) unique.push_back(id);
  }
  *ends = unique;
}

StatusOr<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const std::string& path) {
  StatusOr<model::GgufFile> f = model::open_gguf(path);
  if (!f.ok()) return f.status();
  StatusOr<std::string> doc = tokenizer_json_from_gguf(*f);
  if (!doc.ok()) return doc.status();
  StatusOr<std::unique_ptr<HfTokenizer>> tok = HfTokenizer::from_json(*doc, path);
  if (!tok.ok()) return tok.status();
  auto id = [&](const char* key) -> int64_t {
    const model::GgufValue* v = f->find(key);
    return v ? int64_t(v->u) : -1;
  };
  std::vector<int64_t> ends = {id("tokenizer.ggml.eos_token_id"),
                               id("tokenizer.ggml.eot_token_id")};
  add_end_tokens(**tok, &ends);
  const model::GgufValue* add_bos = f->find("tokenizer.ggml.add_bos_token");
  ChatTemplate chat;
  if (const model::GgufValue* t = f->find("tokenizer.chat_template")) {
    StatusOr<ChatTemplate> c = chat_template_from_jinja(t->s);
    if (c.ok()) chat = *c;  // an unknown template leaves plain prompts working
  }
  (*tok)->set_special(id("tokenizer.ggml.bos_token_id"), add_bos && add_bos->b, ends, chat);
  return std::unique_ptr<Tokenizer>(std::move(*tok));
}

// A special token in tokenizer_config.json: "text" or {"content": "text", ...}.
std::string token_text(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

// The tokenizer.json at `file`, with the special tokens and template of the tokenizer_config.json
// and generation_config.json in `dir` when they are there.
StatusOr<std::unique_ptr<Tokenizer>> load_hf_tokenizer(const std::string& dir,
                                                       const std::string& file) {
  StatusOr<std::string> doc = model::read_text_file(file);
  if (!doc.ok()) {
    return Status::NotFound(file +
                            " is missing: a Hugging Face model directory "
                            "needs its tokenizer");
  }
  StatusOr<std::unique_ptr<HfTokenizer>> tok = HfTokenizer::from_json(*doc, file);
  if (!tok.ok()) return tok.status();
  json config = json::object(), generation = json::object();
  if (StatusOr<std::string> t = model::read_text_file(dir + "/tokenizer_config.json"); t.ok()) {
    config = json::parse(*t, nullptr, false);
    if (!config.is_object()) {
      return Status::InvalidArgument(dir + "/tokenizer_config.json: is not a JSON object");
    }
  }
  if (StatusOr<std::string> t = model::read_text_file(dir + "/generation_config.json"); t.ok()) {
    generation = json::parse(*t, nullptr, false);
    if (!generation.is_object()) generation = json::object();
  }
  std::vector<int64_t> ends = {(*tok)->token_id(token_text(config, "eos_token"))};
  auto eos = generation.find("eos_token_id");
  if (eos != generation.end() && eos->is_number_integer()) ends.push_back(eos->get<int64_t>());
  if (eos != generation.end() && eos->is_array()) {
    for (const json& e : *eos) {
      if (e.is_number_integer()) ends.push_back(e.get<int64_t>());
    }
  }
  add_end_tokens(**tok, &ends);
  ChatTemplate chat;
  auto tmpl = config.find("chat_template");
  if (tmpl != config.end() && tmpl->is_string()) {
    StatusOr<ChatTemplate> c = chat_template_from_jinja(tmpl->get<std::string>());
    if (c.ok()) chat = *c;
  }
  bool add_bos = config.contains("add_bos_token") && config["add_bos_token"].is_boolean() &&
                 config["add_bos_token"].get<bool>();
  (*tok)->set_special((*tok)->token_id(token_text(config, "bos_token")), add_bos, ends, chat);
  return std::unique_ptr<Tokenizer>(std::move(*tok));
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::NotFound(path + ": no such file or directory");
  if (S_ISDIR(st.st_mode)) return load_hf_tokenizer(path, path + "/tokenizer.json");
  std::string name = path.substr(path.find_last_of('/') + 1);
  std::string dir =
      name.size() == path.size() ? "." : path.substr(0, path.size() - name.size() - 1);
  if (name == "config.json") return load_hf_tokenizer(dir, dir + "/tokenizer.json");
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0)
    return load_hf_tokenizer(dir, path);
  return load_gguf_tokenizer(path);
}

}  // namespace tlt::tokenizer
