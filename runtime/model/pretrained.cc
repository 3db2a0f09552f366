#include "runtime/model/pretrained.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/model/checkpoint.h"
#include "runtime/model/gguf.h"
#include "runtime/model/safetensors.h"

namespace tlt::model {
namespace {

// Writes a parameter's float32 values into dst (contiguous, of the parameter's shape).
using Fill = std::function<Status(torch::Tensor& dst)>;

struct Names {
  std::string gguf, hf;
};

// Our parameter name -> its name in GGUF files and in Hugging Face checkpoints. nullopt-like
// empty strings for names we do not know (a bug: every parameter is mapped).
Names source_names(const std::string& ours) {
  static const std::map<std::string, Names> kTop = {
      {"embed.weight", {"token_embd.weight", "model.embed_tokens.weight"}},
      {"norm.weight", {"output_norm.weight", "model.norm.weight"}},
      {"lm_head.weight", {"output.weight", "lm_head.weight"}},
  };
  static const std::map<std::string, Names> kLayer = {
      {"attn_norm.weight", {"attn_norm.weight", "input_layernorm.weight"}},
      {"mlp_norm.weight", {"ffn_norm.weight", "post_attention_layernorm.weight"}},
      {"attn.wq.weight", {"attn_q.weight", "self_attn.q_proj.weight"}},
      {"attn.wk.weight", {"attn_k.weight", "self_attn.k_proj.weight"}},
      {"attn.wv.weight", {"attn_v.weight", "self_attn.v_proj.weight"}},
      {"attn.wo.weight", {"attn_output.weight", "self_attn.o_proj.weight"}},
      {"attn.wq.bias", {"attn_q.bias", "self_attn.q_proj.bias"}},
      {"attn.wk.bias", {"attn_k.bias", "self_attn.k_proj.bias"}},
      {"attn.wv.bias", {"attn_v.bias", "self_attn.v_proj.bias"}},
      {"mlp.w_gate.weight", {"ffn_gate.weight", "mlp.gate_proj.weight"}},
      {"mlp.w_up.weight", {"ffn_up.weight", "mlp.up_proj.weight"}},
      {"mlp.w_down.weight", {"ffn_down.weight", "mlp.down_proj.weight"}},
  };
  auto top = kTop.find(ours);
  if (top != kTop.end()) return top->second;
  // "layers.L.REST"
  size_t dot = ours.find('.', 7);
  if (ours.rfind("layers.", 0) != 0 || dot == std::string::npos) return {};
  std::string layer = ours.substr(7, dot - 7), rest = ours.substr(dot + 1);
  auto it = kLayer.find(rest);
  if (it == kLayer.end()) return {};
  return {"blk." + layer + "." + it->second.gguf, "model.layers." + layer + "." + it->second.hf};
}

std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Status shape_mismatch(const std::string& path, const std::string& name,
                      const std::vector<int64_t>& got, const torch::Tensor& want) {
  return Status::InvalidArgument(path + ": tensor " + name + " has shape " + shape_string(got) +
                                 " but the config implies " + shape_string(want.sizes().vec()));
}

// llama.cpp's converter permutes the rows of each head of Q and K from [2, D/2] to [D/2, 2]
// (interleaved RoPE pairs). Undo it: view the rows as (heads, D/2, 2, C) and swap the middle axes.
void unpermute_rows(torch::Tensor& dst, const torch::Tensor& src, int64_t heads) {
  int64_t rows = src.size(0), cols = src.size(1), half = rows / heads / 2;
  dst.copy_(src.view({heads, half, 2, cols}).transpose(1, 2).reshape({rows, cols}));  // (H*D, C)
}

// A fill from a GGUF tensor, undoing the Q/K permutation for llama files.
Fill gguf_fill(const GgufFile& f, const GgufTensor* t, int64_t permute_heads) {
  return [&f, t, permute_heads](torch::Tensor& dst) -> Status {
    // (H*D, C) in llama.cpp's row order when permuted, else dst itself.
    torch::Tensor out = permute_heads == 0 ? dst : torch::empty_like(dst);
    TLT_RETURN_IF_ERROR(dequantize(t->type, t->data, t->n_elements(), out.data_ptr<float>())
                            .with_context(f.path + ": tensor " + t->name));
    if (permute_heads != 0) unpermute_rows(dst, out, permute_heads);
    if (f.file) f.file->release(t->data, t->n_bytes);
    return Status::Ok();
  };
}

using Planner = std::function<StatusOr<Fill>(const std::string& ours, const torch::Tensor& dst)>;

// Checks every parameter's source and shape first, then fills them all.
Status fill_model(Transformer& model, const Planner& plan) {
  std::vector<std::pair<torch::Tensor, Fill>> fills;
  bool tied = model->config().tied_embeddings;
  for (auto& p : model->named_parameters()) {
    if (tied && p.key() == "lm_head.weight") continue;  // shares embed.weight's storage
    StatusOr<Fill> fill = plan(p.key(), p.value());
    if (!fill.ok()) return fill.status();
    fills.emplace_back(p.value(), std::move(*fill));
  }
  torch::NoGradGuard no_grad;
  for (auto& [dst, fill] : fills) TLT_RETURN_IF_ERROR(fill(dst));
  return Status::Ok();
}

StatusOr<PretrainedModel> load_gguf(const std::string& path) {
  StatusOr<GgufFile> file = open_gguf(path);
  if (!file.ok()) return file.status();
  StatusOr<PretrainedConfig> config = config_from_gguf(*file);
  if (!config.ok()) return config.status();
  PretrainedModel out;
  out.config = *config;
  out.format = PretrainedFormat::kGguf;
  out.model = Transformer(config->config);
  const ModelConfig& c = config->config;
  bool llama = config->architecture == "llama";
  const GgufFile& f = *file;
  Planner plan = [&](const std::string& ours, const torch::Tensor& dst) -> StatusOr<Fill> {
    std::string name = source_names(ours).gguf;
    const GgufTensor* t = f.tensor(name);
    if (t == nullptr) {
      return Status::InvalidArgument(path + ": tensor " + name + " is missing (for " + ours + ")");
    }
    if (t->torch_shape() != dst.sizes().vec())
      return shape_mismatch(path, name, t->torch_shape(), dst);
    int64_t heads = 0;
    if (llama && ours.find("attn.wq.weight") != std::string::npos) heads = c.n_heads;
    if (llama && ours.find("attn.wk.weight") != std::string::npos) heads = c.n_kv_heads;
    return gguf_fill(f, t, heads);
  };
  TLT_RETURN_IF_ERROR(fill_model(out.model, plan));
  out.model->eval();
  return out;
}

// The safetensors files of a Hugging Face directory: model.safetensors, or the shards that
// model.safetensors.index.json's weight_map names.
StatusOr<std::vector<SafetensorsFile>> open_hf_weights(const std::string& dir) {
  std::vector<std::string> files;
  std::string index_path = dir + "/model.safetensors.index.json";
  StatusOr<std::string> index = read_text_file(index_path);
  if (index.ok()) {
    nlohmann::json j = nlohmann::json::parse(*index, nullptr, false);
    auto map = j.is_object() ? j.find("weight_map") : j.end();
    if (j.is_discarded() || !j.is_object() || map == j.end() || !map->is_object()) {
      return Status::InvalidArgument(index_path + ": weight_map is missing");
    }
    std::set<std::string> unique;
    for (auto& [name, file] : map->items()) {
      if (!file.is_string())
        return Status::InvalidArgument(index_path + ": weight_map." + name + " is not a file name");
      unique.insert(file.get<std::string>());
    }
    files.assign(unique.begin(), unique.end());
  } else {
    files.push_back("model.safetensors");
  }
  std::vector<SafetensorsFile> out;
  for (const std::string& name : files) {
    StatusOr<SafetensorsFile> f = open_safetensors(dir + "/" + name);
    if (!f.ok()) return f.status();
    out.push_back(std::move(*f));
  }
  return out;
}

StatusOr<PretrainedModel> load_hf(const std::string& dir) {
  StatusOr<std::string> text = read_text_file(dir + "/config.json");
  if (!text.ok()) return text.status();
  StatusOr<PretrainedConfig> config = config_from_hf_json(*text, dir + "/config.json");
  if (!config.ok()) return config.status();
  StatusOr<std::vector<SafetensorsFile>> shards = open_hf_weights(dir);
  if (!shards.ok()) return shards.status();
  std::map<std::string, std::pair<const SafeTensor*, const SafetensorsFile*>> by_name;
  for (const SafetensorsFile& s : *shards) {
    for (const SafeTensor& t : s.tensors) by_name[t.name] = {&t, &s};
  }
  PretrainedModel out;
  out.config = *config;
  out.format = PretrainedFormat::kHf;
  out.model = Transformer(config->config);
  Planner plan = [&](const std::string& ours, const torch::Tensor& dst) -> StatusOr<Fill> {
    std::string name = source_names(ours).hf;
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return Status::InvalidArgument(dir + ": tensor " + name + " is missing (for " + ours + ")");
    }
    const SafeTensor* t = it->second.first;
    if (t->shape != dst.sizes().vec())
      return shape_mismatch(it->second.second->path, name, t->shape, dst);
    const SafetensorsFile* shard = it->second.second;
    return Fill([t, shard](torch::Tensor& d) {
      safetensor_to_float(*t, d.data_ptr<float>());
      if (shard->file) shard->file->release(t->data, t->n_bytes);
      return Status::Ok();
    });
  };
  TLT_RETURN_IF_ERROR(fill_model(out.model, plan));
  out.model->eval();
  return out;
}

}  // namespace

std::string hf_tensor_name(const std::string& ours) {
  return source_names(ours).hf;
}

StatusOr<PretrainedFormat> detect_pretrained_format(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::NotFound(path + ": no such file or directory");
  if (S_ISDIR(st.st_mode)) {
    if (::stat((path + "/config.json").c_str(), &st) == 0) return PretrainedFormat::kHf;
    return Status::InvalidArgument(path +
                                   ": a directory without config.json is not a Hugging "
                                   "Face model");
  }
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  if (in && std::memcmp(magic, "GGUF", 4) == 0) return PretrainedFormat::kGguf;
  return Status::InvalidArgument(path + ": neither a GGUF file nor a Hugging Face directory");
}

StatusOr<PretrainedModel> load_pretrained(const std::string& path) {
  StatusOr<PretrainedFormat> format = detect_pretrained_format(path);
  if (!format.ok()) return format.status();
  try {
    return *format == PretrainedFormat::kGguf ? load_gguf(path) : load_hf(path);
  } catch (const c10::Error& e) {
    return Status::Internal(path + ": " + e.what_without_backtrace());
  }
}

namespace {

// A tlt checkpoint without a card: the preset whose shapes it has.
StatusOr<ModelCard> preset_card(const std::string& path) {
  StatusOr<torch::Tensor> embed = read_checkpoint_tensor(path, "embed.weight");
  if (!embed.ok()) return embed.status();
  int64_t vocab = embed->size(0), dim = embed->size(1);
  for (const char* name : {"micro", "tiny", "small"}) {
    StatusOr<ModelConfig> c = preset_config(name, vocab);
    if (!c.ok() || c->dim != dim) continue;
    Transformer probe(*c);
    if (!load_checkpoint(*probe, path).ok()) continue;
    ModelCard card;
    card.config.architecture = "llama";
    card.config.config = *c;
    return card;
  }
  return Status::InvalidArgument(path + ": has no " + std::string(kModelCard) +
                                 " beside it and matches no built-in preset (embedding " +
                                 std::to_string(vocab) + " x " + std::to_string(dim) +
                                 "); copy the model.json of the job that wrote it next to it");
}

StatusOr<SourcedModel> load_tlt(const std::string& path) {
  StatusOr<ModelCard> card = find_model_card(path);
  if (!card.ok() && card.status().code() == StatusCode::kNotFound) card = preset_card(path);
  if (!card.ok()) return card.status();
  SourcedModel out;
  out.card = *card;
  out.model = Transformer(card->config.config);
  StatusOr<std::string> meta = load_checkpoint(*out.model, path);
  if (!meta.ok()) return meta.status();
  out.model->eval();
  return out;
}

}  // namespace

StatusOr<SourcedModel> load_model(const ModelSource& source) {
  try {
    if (source.kind == SourceKind::kTlt) return load_tlt(source.path);
    SourcedModel out;
    StatusOr<std::string> tokenizer = model_tokenizer_source(source);
    out.card.tokenizer = tokenizer.ok() ? *tokenizer : "";
    if (source.kind == SourceKind::kHfConfig) {
      StatusOr<std::string> text = read_text_file(source.path);
      if (!text.ok()) return text.status();
      StatusOr<PretrainedConfig> config = config_from_hf_json(*text, source.path);
      if (!config.ok()) return config.status();
      out.card.config = *config;
      out.model = Transformer(config->config);
      out.model->eval();
      out.pretrained = false;
      return out;
    }
    StatusOr<PretrainedModel> m = load_pretrained(source.path);
    if (!m.ok()) return m.status();
    out.model = m->model;
    out.card.config = m->config;
    return out;
  } catch (const c10::Error& e) {
    return Status::Internal(source.path + ": " + e.what_without_backtrace());
  }
}

}  // namespace tlt::model
