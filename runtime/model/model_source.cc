#include "runtime/model/model_source.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/model/gguf.h"
#include "runtime/model/mapped_file.h"
#include "runtime/io/atomic_file.h"

namespace tlt::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool has_magic(const std::string& path, const char* magic, size_t n) {
  std::ifstream in(path, std::ios::binary);
  char got[8] = {};
  in.read(got, std::streamsize(n));
  return in && std::memcmp(got, magic, n) == 0;
}

// The checkpoint file of a tlt checkpoint directory; NotFound when it holds none.
StatusOr<std::string> tlt_checkpoint_in(const fs::path& dir) {
  for (const char* name : {"model.ckpt", "tst/model.ckpt", "policy.ckpt"}) {
    if (is_file(dir / name)) return (dir / name).string();
  }
  // An RL job's checkpoint.path holds tlt/latest (and baseline/latest); latest names step-N.
  fs::path rl = is_file(dir / "latest") ? dir : dir / "tlt";
  std::ifstream latest(rl / "latest");
  std::string step;
  if (latest >> step) {
    fs::path policy = rl / step / "policy.ckpt";
    if (is_file(policy)) return policy.string();
    return Status::NotFound((rl / "latest").string() + " names " + step + " but " +
                            policy.string() + " is missing");
  }
  return Status::NotFound(dir.string() +
                          ": holds no tlt checkpoint (model.ckpt, tst/model.ckpt, policy.ckpt, "
                          "latest or tlt/latest)");
}

Status format_mismatch(const std::string& path, const std::string& format, const std::string& why) {
  return Status::InvalidArgument(path + ": the format is " + format + " but " + why +
                                 "; fix the format (spec.model.format, --format) or the path");
}

// auto: the file's magic or the directory's contents decide.
StatusOr<ModelSource> detect(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (is_file(p / "config.json")) {
      bool weights =
          is_file(p / "model.safetensors") || is_file(p / "model.safetensors.index.json");
      return ModelSource{weights ? SourceKind::kHf : SourceKind::kHfConfig,
                         weights ? path : (p / "config.json").string()};
    }
    StatusOr<std::string> ckpt = tlt_checkpoint_in(p);
    if (!ckpt.ok()) {
      return Status::InvalidArgument(path +
                                     ": neither a Hugging Face directory (no config.json) nor a "
                                     "tlt checkpoint directory");
    }
    return ModelSource{SourceKind::kTlt, *ckpt};
  }
  if (has_magic(path, "GGUF", 4)) return ModelSource{SourceKind::kGguf, path};
  if (has_magic(path, "TLTCKPT1", 8)) return ModelSource{SourceKind::kTlt, path};
  if (p.extension() == ".json") return ModelSource{SourceKind::kHfConfig, path};
  return Status::InvalidArgument(path +
                                 ": not a GGUF file, a tlt checkpoint, a config.json or a "
                                 "directory of one; set spec.model.format or fix the path");
}

}  // namespace

StatusOr<ModelSource> resolve_model_source(const std::string& given, const std::string& format) {
  std::error_code ec;
  if (given.empty()) return Status::InvalidArgument("the model path is empty");
  const char* home = std::getenv("HOME");
  std::string path = given.rfind("~/", 0) == 0 && home ? home + given.substr(1) : given;
  if (!fs::exists(path, ec)) return Status::NotFound(path + ": no such file or directory");
  StatusOr<ModelSource> s = detect(path);
  if (format == "auto" || format.empty()) return s;
  if (format != "gguf" && format != "hf" && format != "tlt") {
    return Status::InvalidArgument("format \"" + format + "\" is not one of auto, gguf, hf, tlt");
  }
  if (format == "tlt" && fs::is_directory(path, ec)) {
    StatusOr<std::string> ckpt = tlt_checkpoint_in(path);
    if (!ckpt.ok()) return ckpt.status();
    return ModelSource{SourceKind::kTlt, *ckpt};
  }
  if (!s.ok()) return format_mismatch(path, format, s.status().message());
  bool hf = s->kind == SourceKind::kHf || s->kind == SourceKind::kHfConfig;
  if (format == "gguf" && s->kind != SourceKind::kGguf)
    return format_mismatch(path, format, "it does not start with the GGUF magic");
  if (format == "hf" && !hf)
    return format_mismatch(path, format, "it is not a config.json nor a directory with one");
  if (format == "tlt" && s->kind != SourceKind::kTlt)
    return format_mismatch(path, format, "it is not a tlt checkpoint (magic TLTCKPT1)");
  return s;
}

std::string model_card_json(const ModelCard& card) {
  json j = json::parse(hf_config_json(card.config));
  j["tlt_tokenizer"] = card.tokenizer;
  return j.dump(2) + "\n";
}

StatusOr<ModelCard> model_card_from_json(const std::string& text, const std::string& path) {
  StatusOr<PretrainedConfig> c = config_from_hf_json(text, path);
  if (!c.ok()) return c.status();
  ModelCard card;
  card.config = *c;
  json j = json::parse(text, nullptr, false);
  auto t = j.find("tlt_tokenizer");
  if (t != j.end() && t->is_string()) card.tokenizer = t->get<std::string>();
  return card;
}

Status write_model_card(const std::string& dir, const ModelCard& card) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  return io::atomic_write(dir + "/" + kModelCard, model_card_json(card));
}

StatusOr<ModelCard> find_model_card(const std::string& checkpoint) {
  fs::path dir = fs::path(checkpoint).parent_path();
  for (int up = 0; up < 3 && !dir.empty(); ++up, dir = dir.parent_path()) {
    fs::path card = dir / kModelCard;
    if (!is_file(card)) continue;
    StatusOr<std::string> text = read_text_file(card.string());
    if (!text.ok()) return text.status();
    return model_card_from_json(*text, card.string());
  }
  return Status::NotFound(checkpoint + ": no " + std::string(kModelCard) +
                          " beside it or in its two parent directories");
}

StatusOr<std::string> model_tokenizer_source(const ModelSource& source) {
  switch (source.kind) {
    case SourceKind::kGguf: {
      StatusOr<GgufFile> f = open_gguf(source.path);
      if (!f.ok()) return f.status();
      return f->find("tokenizer.ggml.model") ? source.path : std::string();
    }
    case SourceKind::kHf:
      if (!is_file(fs::path(source.path) / "tokenizer.json")) {
        return Status::NotFound(source.path +
                                "/tokenizer.json is missing: put the model's tokenizer there, or "
                                "name one in spec.data.tokenizer.path");
      }
      return source.path;
    case SourceKind::kHfConfig: {
      fs::path dir = fs::path(source.path).parent_path();
      if (dir.empty()) dir = ".";
      return is_file(dir / "tokenizer.json") ? dir.string() : std::string();
    }
    case SourceKind::kTlt: {
      StatusOr<ModelCard> card = find_model_card(source.path);
      return card.ok() ? card->tokenizer : std::string();
    }
  }
  return std::string();
}

std::string model_identity(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  auto mtime = fs::last_write_time(p, ec).time_since_epoch().count();
  uintmax_t size = fs::is_regular_file(p, ec) ? fs::file_size(p, ec) : 0;
  return p.string() + ":" + std::to_string(size) + ":" + std::to_string(mtime);
}

}  // namespace tlt::model
