#include "runtime/model/hf_export.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/model/gguf.h"
#include "runtime/model/mapped_file.h"
#include "runtime/model/pretrained.h"
#include "runtime/model/safetensors.h"
#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/io/atomic_file.h"

namespace tlt::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Status write_text(const fs::path& path, const std::string& text, ExportResult* result) {
  TLT_RETURN_IF_ERROR(io::atomic_write(path.string(), text));
  result->files.push_back(path.string());
  return Status::Ok();
}

// model.safetensors: every parameter under its Hugging Face name, float32, contiguous.
Status write_weights(const Transformer& model, const fs::path& dir, ExportResult* result) {
  bool tied = model->config().tied_embeddings;
  std::vector<torch::Tensor> keep;  // (shape of each parameter) contiguous float32 copies
  std::vector<Float32Tensor> tensors;
  for (const auto& p : model->named_parameters()) {
    if (tied && p.key() == "lm_head.weight") continue;
    std::string name = hf_tensor_name(p.key());
    if (name.empty()) return Status::InvalidArgument("parameter " + p.key() + " has no HF name");
    keep.push_back(p.value().detach().to(torch::kCPU, torch::kFloat32).contiguous());
    tensors.push_back({name, keep.back().sizes().vec(), keep.back().data_ptr<float>()});
  }
  fs::path path = dir / "model.safetensors";
  TLT_RETURN_IF_ERROR(write_safetensors(path.string(), tensors));
  result->files.push_back(path.string());
  return Status::Ok();
}

Status copy_file(const fs::path& from, const fs::path& to, ExportResult* result) {
  StatusOr<std::string> text = read_text_file(from.string());
  if (!text.ok()) return text.status();
  return write_text(to, *text, result);
}

// tokenizer.json (+ tokenizer_config.json) from a GGUF file's vocabulary.
Status write_gguf_tokenizer(const std::string& gguf, const fs::path& dir, ExportResult* result) {
  StatusOr<GgufFile> f = open_gguf(gguf);
  if (!f.ok()) return f.status();
  StatusOr<std::string> doc = tokenizer::tokenizer_json_from_gguf(*f);
  if (!doc.ok()) return doc.status();
  StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::load_tokenizer(gguf);
  if (!tok.ok()) return tok.status();
  json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}};
  auto text_of = [&](int64_t id) -> std::string {
    StatusOr<std::string> t = (*tok)->decode({id}, false);
    return t.ok() ? *t : "";
  };
  if ((*tok)->bos_id() >= 0) config["bos_token"] = text_of((*tok)->bos_id());
  if (!(*tok)->end_ids().empty()) config["eos_token"] = text_of((*tok)->end_ids()[0]);
  if (const GgufValue* t = f->find("tokenizer.chat_template")) config["chat_template"] = t->s;
  TLT_RETURN_IF_ERROR(write_text(dir / "tokenizer.json", *doc, result));
  return write_text(dir / "tokenizer_config.json", config.dump(2) + "\n", result);
}

// tokenizer_config.json from `from` (when it exists) with a tokenizer_class: without one,
// AutoTokenizer picks the model type's class, which adds that class's default special tokens
// (LlamaTokenizerFast: <s>, <unk>) to a vocabulary that may not have them.
Status write_tokenizer_config(const fs::path& from, const fs::path& dir, ExportResult* result) {
  json config = json::object();
  std::error_code ec;
  if (fs::is_regular_file(from, ec)) {
    StatusOr<std::string> text = read_text_file(from.string());
    if (!text.ok()) return text.status();
    config = json::parse(*text, nullptr, false);
    if (!config.is_object())
      return Status::InvalidArgument(from.string() + ": is not a JSON object");
  }
  if (!config.contains("tokenizer_class")) config["tokenizer_class"] = "PreTrainedTokenizerFast";
  return write_text(dir / "tokenizer_config.json", config.dump(2) + "\n", result);
}

Status write_tokenizer(const std::string& source, const fs::path& dir, ExportResult* result) {
  std::error_code ec;
  bool is_dir = fs::is_directory(source, ec);
  if (!is_dir && fs::path(source).extension() != ".json")
    return write_gguf_tokenizer(source, dir, result);
  fs::path from_dir = is_dir ? fs::path(source) : fs::path(source).parent_path();
  fs::path file = is_dir ? from_dir / "tokenizer.json" : fs::path(source);
  TLT_RETURN_IF_ERROR(copy_file(file, dir / "tokenizer.json", result));
  TLT_RETURN_IF_ERROR(write_tokenizer_config(from_dir / "tokenizer_config.json", dir, result));
  if (is_dir && fs::is_regular_file(from_dir / "generation_config.json", ec))
    TLT_RETURN_IF_ERROR(
        copy_file(from_dir / "generation_config.json", dir / "generation_config.json", result));
  return Status::Ok();
}

}  // namespace

StatusOr<ExportResult> export_to_hf(const std::string& path, const std::string& format,
                                    const std::string& dir) {
  StatusOr<ModelSource> source = resolve_model_source(path, format);
  if (!source.ok()) return source.status();
  StatusOr<SourcedModel> loaded = load_model(*source);
  if (!loaded.ok()) return loaded.status();
  const Transformer& model = loaded->model;
  const ModelCard& card = loaded->card;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable(dir + ": cannot create: " + ec.message());
  ExportResult result;
  try {
    TLT_RETURN_IF_ERROR(
        write_text(fs::path(dir) / "config.json", hf_config_json(card.config), &result));
    TLT_RETURN_IF_ERROR(write_weights(model, dir, &result));
  } catch (const c10::Error& e) {
    return Status::Internal(dir + ": " + e.what_without_backtrace());
  }
  if (card.tokenizer.empty()) {
    result.tokenizer_note =
        "no tokenizer.json: the model's tokenizer is tlt's own (sentencepiece BPE or the RL codec) "
        "or unknown";
    return result;
  }
  Status tok = write_tokenizer(card.tokenizer, dir, &result);
  if (!tok.ok()) return tok.with_context("the model's tokenizer " + card.tokenizer);
  return result;
}

}  // namespace tlt::model
