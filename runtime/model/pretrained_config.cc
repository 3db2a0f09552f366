#include "runtime/model/pretrained_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace tlt::model {
namespace {

using nlohmann::json;

Status unsupported_architecture(const std::string& path, const std::string& arch) {
  return Status::InvalidArgument(path + ": architecture \"" + arch +
                                 "\" is not supported; tlt loads llama and qwen2 models");
}

// Field accessors for config.json: a missing required field or a wrong type names both.
class Fields {
 public:
  Fields(const json& j, const std::string& path) : j_(j), path_(path) {}
  Status missing(const std::string& key) const {
    return Status::InvalidArgument(path_ + ": " + key + " is missing");
  }
  Status integer(const std::string& key, int64_t* out, bool required = true) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return required ? missing(key) : Status::Ok();
    if (!it->is_number_integer()) {
      return Status::InvalidArgument(path_ + ": " + key + " must be an integer");
    }
    *out = it->get<int64_t>();
    return Status::Ok();
  }
  Status number(const std::string& key, double* out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::Ok();
    if (!it->is_number()) return Status::InvalidArgument(path_ + ": " + key + " must be a number");
    *out = it->get<double>();
    return Status::Ok();
  }
  bool boolean(const std::string& key, bool fallback) const {
    auto it = j_.find(key);
    return it != j_.end() && it->is_boolean() ? it->get<bool>() : fallback;
  }
  std::string string(const std::string& key) const {
    auto it = j_.find(key);
    return it != j_.end() && it->is_string() ? it->get<std::string>() : "";
  }
  bool present(const std::string& key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }

 private:
  const json& j_;
  const std::string& path_;
};

Status check_hf_features(const Fields& f, const std::string& path, const std::string& arch) {
  if (f.present("rope_scaling")) {
    return Status::InvalidArgument(path + ": rope_scaling is set; tlt implements plain RoPE only");
  }
  std::string act = f.string("hidden_act");
  if (!act.empty() && act != "silu") {
    return Status::InvalidArgument(path + ": hidden_act \"" + act + "\" is not supported (silu)");
  }
  if (arch == "llama" && (f.boolean("attention_bias", false) || f.boolean("mlp_bias", false))) {
    return Status::InvalidArgument(path + ": attention_bias/mlp_bias are not supported for llama");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PretrainedConfig> config_from_hf_json(const std::string& json_text,
                                               const std::string& path) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument(path + ": is not a JSON object");
  }
  Fields f(j, path);
  PretrainedConfig out;
  out.architecture = f.string("model_type");
  if (out.architecture.empty()) return f.missing("model_type");
  if (out.architecture != "llama" && out.architecture != "qwen2") {
    return unsupported_architecture(path, out.architecture);
  }
  TLT_RETURN_IF_ERROR(check_hf_features(f, path, out.architecture));
  ModelConfig& c = out.config;
  TLT_RETURN_IF_ERROR(f.integer("vocab_size", &c.vocab));
  TLT_RETURN_IF_ERROR(f.integer("hidden_size", &c.dim));
  TLT_RETURN_IF_ERROR(f.integer("num_hidden_layers", &c.n_layers));
  TLT_RETURN_IF_ERROR(f.integer("num_attention_heads", &c.n_heads));
  TLT_RETURN_IF_ERROR(f.integer("intermediate_size", &c.ffn));
  c.n_kv_heads = c.n_heads;
  TLT_RETURN_IF_ERROR(f.integer("num_key_value_heads", &c.n_kv_heads, false));
  TLT_RETURN_IF_ERROR(f.integer("head_dim", &c.n_head_dim, false));
  int64_t context = 2048;
  TLT_RETURN_IF_ERROR(f.integer("max_position_embeddings", &context, false));
  c.max_seq = std::min(context, kMaxPretrainedSeq);
  c.rope_theta = 10000.0;
  TLT_RETURN_IF_ERROR(f.number("rope_theta", &c.rope_theta));
  c.norm_eps = 1e-6;
  TLT_RETURN_IF_ERROR(f.number("rms_norm_eps", &c.norm_eps));
  c.tied_embeddings = f.boolean("tie_word_embeddings", false);
  c.qkv_bias = out.architecture == "qwen2";
  if (c.n_head_dim == c.dim / std::max<int64_t>(c.n_heads, 1)) c.n_head_dim = 0;
  Status valid = c.validate();
  if (!valid.ok()) return valid.with_context(path);
  return out;
}

StatusOr<PretrainedConfig> config_from_gguf(const GgufFile& file) {
  PretrainedConfig out;
  StatusOr<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok()) return arch.status();
  out.architecture = *arch;
  if (*arch != "llama" && *arch != "qwen2") return unsupported_architecture(file.path, *arch);
  const std::string a = *arch + ".";
  ModelConfig& c = out.config;
  auto get = [&](const std::string& key, int64_t* dst) -> Status {
    StatusOr<uint64_t> v = file.get_uint(a + key);
    if (!v.ok()) return v.status();
    *dst = int64_t(*v);
    return Status::Ok();
  };
  TLT_RETURN_IF_ERROR(get("block_count", &c.n_layers));
  TLT_RETURN_IF_ERROR(get("embedding_length", &c.dim));
  TLT_RETURN_IF_ERROR(get("feed_forward_length", &c.ffn));
  TLT_RETURN_IF_ERROR(get("attention.head_count", &c.n_heads));
  c.n_kv_heads = c.n_heads;
  if (file.find(a + "attention.head_count_kv")) {
    TLT_RETURN_IF_ERROR(get("attention.head_count_kv", &c.n_kv_heads));
  }
  if (file.find(a + "attention.key_length"))
    TLT_RETURN_IF_ERROR(get("attention.key_length", &c.n_head_dim));
  int64_t context = 2048;
  if (file.find(a + "context_length")) TLT_RETURN_IF_ERROR(get("context_length", &context));
  c.max_seq = std::min(context, kMaxPretrainedSeq);
  StatusOr<double> eps = file.get_float(a + "attention.layer_norm_rms_epsilon");
  if (!eps.ok()) return eps.status();
  c.norm_eps = *eps;
  c.rope_theta = 10000.0;
  if (file.find(a + "rope.freq_base")) c.rope_theta = *file.get_float(a + "rope.freq_base");
  if (file.find(a + "rope.scaling.type")) {
    StatusOr<std::string> t = file.get_string(a + "rope.scaling.type");
    if (t.ok() && *t != "none") {
      return Status::InvalidArgument(file.path + ": " + a + "rope.scaling.type is \"" + *t +
                                     "\"; tlt implements plain RoPE only");
    }
  }
  const GgufTensor* embd = file.tensor("token_embd.weight");
  if (embd == nullptr || embd->ne.size() != 2) {
    return Status::InvalidArgument(file.path + ": tensor token_embd.weight is missing");
  }
  c.vocab = embd->ne[1];
  c.tied_embeddings = file.tensor("output.weight") == nullptr;
  c.qkv_bias = file.tensor("blk.0.attn_q.bias") != nullptr;
  if (c.n_head_dim == c.dim / std::max<int64_t>(c.n_heads, 1)) c.n_head_dim = 0;
  Status valid = c.validate();
  if (!valid.ok()) return valid.with_context(file.path);
  return out;
}

std::string hf_config_json(const PretrainedConfig& pc) {
  const ModelConfig& c = pc.config;
  bool qwen2 = pc.architecture == "qwen2";
  json j = {{"architectures", {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
            {"model_type", qwen2 ? "qwen2" : "llama"},
            {"vocab_size", c.vocab},
            {"hidden_size", c.dim},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_kv_heads},
            {"intermediate_size", c.ffn},
            {"max_position_embeddings", c.max_seq},
            {"rope_theta", c.rope_theta},
            {"rms_norm_eps", c.norm_eps},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", c.tied_embeddings},
            {"torch_dtype", "float32"}};
  if (c.n_head_dim > 0) j["head_dim"] = c.n_head_dim;
  if (qwen2) j["use_sliding_window"] = false;
  return j.dump(2) + "\n";
}

}  // namespace tlt::model
