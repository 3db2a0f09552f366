#include "runtime/cli/local_checks.h"

#include <filesystem>
#include <unordered_map>

#include "api/fnv.h"
#include "api/validate.h"
#include "runtime/cli/reward_probe.h"
#include "runtime/dataset/dataset.h"
#include "runtime/model/config.h"
#include "runtime/model/gguf.h"
#include "runtime/model/mapped_file.h"
#include "runtime/model/model_source.h"
#include "runtime/model/pretrained_config.h"
#include "runtime/reward/verifiers.h"
#include "runtime/rl/dataset_task.h"

namespace tlt::cli {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

void add(api::FieldErrors* to, const std::string& path, std::string message) {
  to->push_back({path, std::move(message)});
}

// What a missing relative path's error adds when the file is beside the manifest instead.
std::string beside_manifest(const std::string& path, const std::string& manifest) {
  if (path.empty() || path[0] == '/' || path[0] == '~' || manifest.empty()) return "";
  fs::path dir = fs::path(manifest).parent_path();
  std::error_code ec;
  if (dir.empty() || fs::equivalent(dir, ".", ec) || !fs::exists(dir / path, ec)) return "";
  return "; " + (dir / path).string() +
         " exists beside the manifest: give that path, or run tlt from " + dir.string();
}

// `st`'s message, with the manifest hint when it says a path is missing.
std::string path_error(const Status& st, const std::string& path, const std::string& manifest) {
  std::string m = st.message();
  if (st.code() != StatusCode::kNotFound) return m;
  if (m.find("working directory") == std::string::npos && !path.empty() && path[0] != '/' &&
      path[0] != '~') {
    std::error_code ec;
    m += " (a relative path is read from the working directory, " + fs::current_path(ec).string() +
         ")";
  }
  return m + beside_manifest(path, manifest);
}

// What a note says of a pod's path (pod_path).
std::string pod_note(const std::string& path) {
  return path + " is not on this machine (" + (fs::path("/") / *++fs::path(path).begin()).string() +
         " does not exist here): taken for a path inside the job's pods; not checked";
}

// Splits "spec.task.dataset.answerField: the row has no ..." into its field and the rest.
std::pair<std::string, std::string> split_field(const std::string& message) {
  if (message.rfind("spec.", 0) != 0) return {"", message};
  size_t colon = message.find(": ");
  if (colon == std::string::npos) return {"", message};
  return {message.substr(0, colon), message.substr(colon + 2)};
}

// The head of one dataset file: its rows, checked as the run checks them, and each row's prompt
// (a hash of its JSON), in order.
struct Head {
  std::unique_ptr<dataset::Dataset> data;
  std::vector<uint64_t> prompts;
};

// Reads the first rows of `path` (the field `field`); a problem goes to `f`, which makes the
// returned head empty.
std::optional<Head> read_head(const api::DatasetSpec& spec, const reward::VerifierOptions* verifier,
                              const std::string& path, const std::string& field,
                              const LocalCheckOptions& o, Findings* f) {
  Head head;
  std::string bad_field;
  dataset::OpenOptions open;
  open.max_rows = o.max_rows;
  open.visit = [&](uint64_t, const json& row) -> Status {
    Status s = rl::DatasetTask::check_row(spec, verifier, row);
    if (!s.ok()) {
      auto [name, rest] = split_field(s.message());
      bad_field = name;
      return Status(s.code(), rest);
    }
    const json* prompt = dataset::at_path(row, spec.prompt_field);
    head.prompts.push_back(fnv1a64(prompt->dump(-1, ' ', false, json::error_handler_t::replace)));
    return Status::Ok();
  };
  StatusOr<std::unique_ptr<dataset::Dataset>> d = dataset::Dataset::open(path, open);
  if (!d.ok()) {
    add(&f->errors, bad_field.empty() ? field : bad_field,
        path_error(d.status(), path, o.manifest));
    return std::nullopt;
  }
  if ((*d)->rows() == 0) {
    add(&f->errors, field,
        path + " holds no rows; a dataset is JSON Lines (one object per line) or Parquet");
    return std::nullopt;
  }
  if (!(*d)->complete())
    add(&f->notes, field,
        "checked the first " + std::to_string((*d)->rows()) + " rows of " + path +
            "; `tlt run` checks every row before it trains");
  head.data = std::move(*d);
  return head;
}

// Held-out prompts that training rows also hold (heldOutPath), or training prompts repeated
// (heldOut: the split may hold out one copy and train on another).
void check_overlap(const api::DatasetSpec& spec, const Head& train, const Head* held, Findings* f) {
  std::unordered_map<uint64_t, uint64_t> first;  // prompt -> its first training row
  uint64_t repeated = 0;
  std::string example;
  for (uint64_t i = 0; i < train.prompts.size(); ++i) {
    auto [it, fresh] = first.emplace(train.prompts[i], i);
    if (!fresh && !held && repeated++ == 0)
      example = train.data->where(it->second) + " and " + train.data->where(i);
  }
  if (!held) {
    if (repeated > 0)
      add(&f->warnings, "spec.task.dataset.heldOut",
          std::to_string(repeated) +
              " training rows repeat an earlier row's prompt (first: " + example +
              "): the held-out split may hold out one copy and train on another; remove the "
              "repeats");
    return;
  }
  uint64_t shared = 0;
  for (uint64_t i = 0; i < held->prompts.size(); ++i) {
    auto it = first.find(held->prompts[i]);
    if (it == first.end()) continue;
    if (shared++ == 0) example = held->data->where(i) + " = " + train.data->where(it->second);
  }
  if (shared > 0)
    add(&f->errors, "spec.task.dataset.heldOutPath",
        std::to_string(shared) + " held-out rows have a prompt that training rows also have " +
            "(first: " + example + "): the evaluation would score problems the policy trained " +
            "on; remove them from " + spec.path + " or from " + spec.held_out_path);
}

void check_dataset(const api::RLJob& job, const LocalCheckOptions& o, Findings* f) {
  const api::DatasetSpec& spec = job.spec.task.dataset;
  if (spec.path.empty()) return;
  StatusOr<std::optional<reward::VerifierOptions>> verifier =
      reward::verifier_options(job.spec.reward);
  if (!verifier.ok()) {
    auto [name, rest] = split_field(verifier.status().message());
    add(&f->errors, name.empty() ? "spec.reward" : name, rest);
    return;
  }
  const reward::VerifierOptions* v = verifier->has_value() ? &**verifier : nullptr;
  const std::string paths[2] = {spec.path, spec.held_out_path};
  const char* fields[2] = {"spec.task.dataset.path", "spec.task.dataset.heldOutPath"};
  std::optional<Head> heads[2];
  for (int s = 0; s < 2; ++s) {
    if (paths[s].empty()) continue;
    if (pod_path(paths[s])) {
      add(&f->notes, fields[s], pod_note(paths[s]));
      return;
    }
    heads[s] = read_head(spec, v, paths[s], fields[s], o, f);
    if (!heads[s]) return;
  }
  const std::optional<Head>& train = heads[0];
  const std::optional<Head>& held = heads[1];
  check_overlap(spec, *train, held ? &*held : nullptr, f);
}

// The model's context as the run sizes it, and what to call the model in a message; nullopt
// (with a note or an error) when it cannot be read here.
std::optional<std::pair<int64_t, std::string>> model_context(const api::ModelSpec& m, bool rl_job,
                                                             const LocalCheckOptions& o,
                                                             Findings* f) {
  const std::string field = "spec.model.path";
  if (m.path.empty()) {
    StatusOr<model::ModelConfig> c = model::preset_config(m.effective_preset());
    if (!c.ok()) return std::nullopt;  // the manifest's own validation names the preset
    return std::pair(c->max_seq, "preset " + m.effective_preset());
  }
  if (pod_path(m.path)) {
    add(&f->notes, field, pod_note(m.path));
    return std::nullopt;
  }
  StatusOr<model::ModelSource> source = model::resolve_model_source(m.path, m.format);
  if (!source.ok()) {
    add(&f->errors, field, path_error(source.status(), m.path, o.manifest));
    return std::nullopt;
  }
  StatusOr<model::PretrainedConfig> config = Status::NotFound("");
  switch (source->kind) {
    case model::SourceKind::kGguf: {
      StatusOr<model::GgufFile> file = model::open_gguf(source->path);
      config = file.ok() ? model::config_from_gguf(*file) : file.status();
      break;
    }
    case model::SourceKind::kHf:
    case model::SourceKind::kHfConfig: {
      std::string json_path = source->kind == model::SourceKind::kHf
                                  ? (fs::path(source->path) / "config.json").string()
                                  : source->path;
      StatusOr<std::string> text = model::read_text_file(json_path);
      config = text.ok() ? model::config_from_hf_json(*text, json_path) : text.status();
      if (config.ok() && rl_job && source->kind == model::SourceKind::kHfConfig) {
        add(&f->errors, field,
            source->path +
                " is a config.json without weights; an RLJob starts from a trained "
                "model: a GGUF file, a Hugging Face directory or a tlt checkpoint");
        return std::nullopt;
      }
      break;
    }
    case model::SourceKind::kTlt: {
      StatusOr<model::ModelCard> card = model::find_model_card(source->path);
      if (!card.ok()) {
        add(&f->notes, field,
            source->path + " has no model card (" + model::kModelCard +
                "); its context is checked when the run loads it");
        return std::nullopt;
      }
      config = card->config;
      break;
    }
  }
  if (!config.ok()) {
    add(&f->errors, field, config.status().message());
    return std::nullopt;
  }
  if (rl_job) {  // the policy reads its prompts through the model's own tokenizer
    StatusOr<std::string> tokenizer = model::model_tokenizer_source(*source);
    if (!tokenizer.ok())
      add(&f->errors, field, tokenizer.status().message());
    else if (tokenizer->empty())
      add(&f->errors, field,
          source->path +
              " carries no tokenizer an RLJob can use (a GGUF without tokenizer.ggml.* metadata, "
              "a tlt checkpoint without one in its model card): use a model with its own");
  }
  int64_t context = config->config.max_seq;
  std::string label = field + " " + m.path;
  if (context == model::kMaxPretrainedSeq)
    label += " (tlt sizes a model's context at most " + std::to_string(model::kMaxPretrainedSeq) +
             " tokens)";
  return std::pair(context, label);
}

void check_tst_files(const api::TSTPretrainJob& job, const LocalCheckOptions& o, Findings* f) {
  model_context(job.spec.model, false, o, f);
  const std::vector<std::string>& paths = job.spec.data.paths;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::error_code ec;
    if (pod_path(paths[i]) || fs::is_regular_file(paths[i], ec)) continue;
    add(&f->errors, api::index_path("spec.data.paths", i),
        path_error(Status::NotFound(paths[i] + ": no such file"), paths[i], o.manifest));
  }
}

}  // namespace

void Findings::append(const Findings& other) {
  errors.insert(errors.end(), other.errors.begin(), other.errors.end());
  warnings.insert(warnings.end(), other.warnings.begin(), other.warnings.end());
  notes.insert(notes.end(), other.notes.begin(), other.notes.end());
}

bool pod_path(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  fs::path p(path);
  auto it = p.begin();  // "/"
  if (++it == p.end()) return false;
  std::error_code ec;
  return !fs::exists(fs::path("/") / *it, ec);
}

Findings check_local(const api::Job& job, const LocalCheckOptions& o) {
  Findings f;
  if (const auto* tst = std::get_if<api::TSTPretrainJob>(&job)) {
    check_tst_files(*tst, o, &f);
    return f;
  }
  const auto& rl = std::get<api::RLJob>(job);
  check_dataset(rl, o, &f);
  if (auto context = model_context(rl.spec.model, true, o, &f))
    api::check_model_context(rl.spec.algorithm, context->first, context->second, &f.errors);
  if (o.probe_reward && rl.spec.reward.type == "command") f.append(probe_reward(rl));
  return f;
}

}  // namespace tlt::cli
