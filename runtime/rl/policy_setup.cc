#include "runtime/rl/policy_setup.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "api/fnv.h"
#include "api/validate.h"
#include "runtime/device/device.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/config.h"
#include "runtime/model/precision.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/dataset_task.h"
#include "runtime/rl/drafter_on_generations.h"
#include "runtime/rl/model_codec.h"
#include "runtime/rl/seeds.h"
#include "runtime/rl/warm_start.h"

namespace tlt::rl {
namespace {
namespace fs = std::filesystem;

// The steps of set_up_policy, each filling part of the PolicySetup.
class PolicyBuilder {
 public:
  PolicyBuilder(const RLRunPlan& plan, const RunCallbacks& cb, std::function<bool()> cancelled,
                PolicySetup& p)
      : plan_(plan), cb_(cb), cancelled_(std::move(cancelled)), p_(p) {}
  Status build();

 private:
  // The policy (and an uninitialised reference of its shape): the preset with the ASCII codec,
  // or spec.model.path's model with its own tokenizer.
  Status make_preset_policy();
  // spec.task.dataset's task (checked whole before any model loads), then its prompts fitted to
  // the policy's context; both before anything is written.
  Status open_dataset(DatasetTask** out);
  Status fit_dataset(DatasetTask* task);
  // The task's identity in cache keys: its name, or the dataset's files and fields.
  std::string task_key() const;
  Status load_model_policy();
  // spec.model.device: the policy and the reference on the trainer's device (the job's first).
  Status place_models();
  Status warm_start_policy();
  Status warm_start_drafter();
  Status warm_start_drafter_on_generations();
  WarmStartOptions warm_start_options() const;
  void log(const std::string& s) const {
    if (cb_.log) cb_.log(s);
  }

  const RLRunPlan& plan_;
  const RunCallbacks& cb_;
  std::function<bool()> cancelled_;
  PolicySetup& p_;
};

Status PolicyBuilder::build() {
  DatasetTask* dataset = nullptr;
  if (!plan_.task.has_dataset()) {
    StatusOr<std::unique_ptr<Task>> task =
        make_task(plan_.task_name(), plan_.task_seed(), TaskOptions{plan_.free_text()});
    if (!task.ok()) return task.status();
    p_.task = std::move(*task);
  } else {
    TLT_RETURN_IF_ERROR(open_dataset(&dataset));
  }
  StatusOr<model::DrafterFeatures> features = model::parse_drafter_features(plan_.drafter.features);
  if (!features.ok()) return features.status().with_context("spec.drafter.features");
  TLT_RETURN_IF_ERROR(plan_.pretrained() ? load_model_policy() : make_preset_policy());
  // A response too long for the model's context leaves a prompt no room: said with the numbers
  // (the rule `tlt validate` applies to the model's config).
  api::FieldErrors context;
  api::check_model_context(
      plan_.algorithm, p_.cfg.max_seq,
      plan_.pretrained() ? "spec.model.path " + plan_.model.path : "preset " + plan_.preset(),
      &context);
  if (!context.empty()) return Status::FailedPrecondition(context[0].to_string());
  TLT_RETURN_IF_ERROR(place_models());
  if (dataset) TLT_RETURN_IF_ERROR(fit_dataset(dataset));
  TLT_RETURN_IF_ERROR(warm_start_policy());
  for (auto& p : p_.reference->parameters()) p.set_requires_grad(false);
  p_.reference->eval();
  p_.policy->eval();
  torch::manual_seed(mix_seeds(plan_.seed(), 7));
  p_.drafter = model::Drafter(p_.policy, plan_.drafter.layers, *features);
  // spec.model.dtype for the policy update and for decoding (a worker's engine still falls back
  // to float32 where its probe finds bfloat16 decoding not row-invariant,
  // rollout::EngineOptions::bfloat16), and for the drafter's training (warm start and spot
  // trainers: drafter::DrafterTrainer, 1.7x faster a step on SmolLM2); the drafter's warm start
  // learns the features decoding will hand it.
  p_.bfloat16 = model::use_bfloat16(plan_.model.dtype, plan_.pretrained(),
                                    p_.policy->lm_head->weight.device());
  if (!plan_.baseline && plan_.drafter.warm_start_steps > 0)
    TLT_RETURN_IF_ERROR(warm_start_drafter());
  // The RNG state after initialisation must not depend on whether the drafter warm start ran
  // (the baseline skips it), so the two modes take the same random draws from here on.
  torch::manual_seed(mix_seeds(plan_.seed(), 11));
  return Status::Ok();
}

Status PolicyBuilder::open_dataset(DatasetTask** out) {
  if (plan_.warm_start_steps() > 0)
    return Status::InvalidArgument(
        "spec.algorithm.warmStartSteps: a dataset's rows carry no worked solutions to imitate; "
        "set it to 0 (the default with spec.model.path, a trained model)");
  StatusOr<std::unique_ptr<DatasetTask>> task =
      DatasetTask::open(plan_.task.dataset, plan_.reward, plan_.task_seed(), cb_.log);
  if (!task.ok()) return task.status();
  *out = task->get();
  p_.task = std::move(*task);
  return Status::Ok();
}

Status PolicyBuilder::fit_dataset(DatasetTask* task) {
  // The rollouts' budget (runtime/rl/rollout_phase.cc), the tighter of the rollouts' and the
  // evaluation's.
  constexpr int64_t kHeadroom = 64;
  const api::DatasetSpec& d = plan_.task.dataset;
  TLT_RETURN_IF_ERROR(
      task->fit(*p_.codec, p_.max_seq - plan_.algorithm.max_response_tokens - kHeadroom, cb_.log));
  p_.prompts_skipped = task->skipped(), p_.prompts_truncated = task->truncated();
  log("dataset: " + d.path + ": " + std::to_string(task->train_rows()) + " training rows, " +
      std::to_string(task->held_out_rows()) + " held out" +
      (d.held_out_path.empty() ? "" : " (" + d.held_out_path + ")") + "; prompts skipped " +
      std::to_string(task->skipped()) + ", truncated " + std::to_string(task->truncated()) +
      " (spec.task.dataset.longPrompts: " + d.long_prompts + ")");
  return Status::Ok();
}

std::string PolicyBuilder::task_key() const {
  if (!plan_.task.has_dataset()) return plan_.task_name() + "-" + std::to_string(plan_.task_seed());
  const auto& task = static_cast<const DatasetTask&>(*p_.task);
  return "dataset-" + std::to_string(task.fingerprint() % 1000000007ull);
}

Status PolicyBuilder::make_preset_policy() {
  StatusOr<model::ModelConfig> cfg = model::preset_config(plan_.preset(), kTextVocab);
  if (!cfg.ok()) return cfg.status();
  p_.cfg = *cfg;
  p_.card.config.architecture = "llama", p_.card.config.config = p_.cfg;
  p_.max_seq = p_.cfg.max_seq;
  torch::manual_seed(plan_.seed());
  p_.policy = model::Transformer(p_.cfg);
  p_.reference = model::Transformer(p_.cfg);
  p_.model_key = plan_.preset();
  return Status::Ok();
}

Status PolicyBuilder::load_model_policy() {
  StatusOr<model::ModelSource> source =
      model::resolve_model_source(plan_.model.path, plan_.model.format);
  if (!source.ok()) return source.status().with_context("spec.model.path");
  if (source->kind == model::SourceKind::kHfConfig)
    return Status::InvalidArgument("spec.model.path: " + source->path +
                                   " is a config.json without weights; an RLJob starts from a "
                                   "trained model: a GGUF file, a Hugging Face directory or a tlt "
                                   "checkpoint");
  StatusOr<model::SourcedModel> loaded = model::load_model(*source);
  if (!loaded.ok()) return loaded.status().with_context("spec.model.path");
  p_.policy = loaded->model;
  p_.cfg = p_.policy->config();
  p_.card = loaded->card;
  std::error_code ec;
  if (!p_.card.tokenizer.empty()) p_.card.tokenizer = fs::absolute(p_.card.tokenizer, ec).string();
  StatusOr<std::unique_ptr<ModelCodec>> codec = ModelCodec::load(*source, p_.cfg.vocab);
  if (!codec.ok()) return codec.status().with_context("spec.model.path");
  p_.own_codec = std::move(*codec);
  p_.codec = p_.own_codec.get();
  p_.max_seq =
      std::min<int64_t>(p_.cfg.max_seq, kPromptBudget + plan_.algorithm.max_response_tokens);
  torch::manual_seed(plan_.seed());
  p_.reference = model::Transformer(p_.cfg);
  p_.model_key = model::model_identity(source->path) + "-" + plan_.model.format;
  log("policy: " + source->path + " (" + p_.card.config.architecture + ", " +
      std::to_string(p_.cfg.n_layers) + " layers, width " + std::to_string(p_.cfg.dim) +
      ", vocab " + std::to_string(p_.cfg.vocab) + ", " +
      (p_.codec->has_chat() ? "chat template" : "plain prompts") + ")");
  return Status::Ok();
}

Status PolicyBuilder::place_models() {
  StatusOr<device::Placement> placement =
      device::resolve_device(plan_.model.device, device::probe_inventory());
  if (!placement.ok()) return placement.status();
  std::string dev = placement->main_device();
  TLT_RETURN_IF_ERROR(device::make_current(dev));
  // Made on the CPU and moved: a GPU starts from the CPU's weights (on the CPU, a no-op).
  p_.policy->to(torch::Device(dev));
  p_.reference->to(torch::Device(dev));
  std::string workers;  // the rollout workers' devices, in worker order
  if (plan_.listen_port > 0) {
    workers = "each rollout pod resolves " + plan_.model.device + " on its own machine";
  } else {
    for (int w = 0; w < plan_.workers; ++w)
      workers += (w ? ", " : "rollout workers on ") + placement->process_device(w);
    std::string note = device::sharing_note(*placement, plan_.workers, "rollout workers");
    if (!note.empty()) workers += " (" + note + ")";
  }
  log("device: trainer on " + dev + "; " + workers);
  return Status::Ok();
}

// The policy's supervised warm start (cached), and the reference: the warm start, or for a
// pretrained model without one (warm_start_steps 0) the model as loaded.
Status PolicyBuilder::warm_start_policy() {
  WarmStartOptions wo = warm_start_options();
  std::ostringstream key;
  key << p_.model_key << "-" << task_key() << "-" << wo.steps << "-" << wo.learning_rate << "-"
      << wo.batch << "-" << wo.max_response_tokens << "-" << wo.max_prompt_chars << "-" << wo.seed;
  if (wo.unmarked_answers > 0) key << "-unmarked" << wo.unmarked_answers;  // older keys unchanged
  p_.warm_start_key = plan_.cache_dir + "/rl/warm-start-" +
                      std::to_string(fnv1a64(key.str()) % 1000000007ull) + ".ckpt";
  if (plan_.pretrained() && wo.steps == 0) {
    log("warm start: none (spec.model.path is a trained model; set "
        "spec.algorithm.warmStartSteps to imitate the task's worked solutions first)");
    torch::NoGradGuard no_grad;
    auto from = p_.policy->named_parameters();
    for (auto& p : p_.reference->named_parameters()) p.value().copy_(from[p.key()]);
    return Status::Ok();
  }
  p_.warm_start = p_.warm_start_key;
  log("warm start: " + p_.warm_start);
  if (wo.unmarked_answers > 0 && plan_.free_text())
    log("note: spec.algorithm.warmStartUnmarkedAnswers leaves answers unmarked, but the reward "
        "also reads unmarked ones (spec.task.answer resolves to free-text), so RL has no marking "
        "to learn; set spec.task.answer: marker for that");
  wo.cancelled = cancelled_;
  TLT_RETURN_IF_ERROR(load_or_train_warm_start(p_.policy, *p_.task, wo, p_.warm_start,
                                               &p_.warm_start_trained, cb_.warm_start));
  return model::load_checkpoint(*p_.reference, p_.warm_start).status();
}

WarmStartOptions PolicyBuilder::warm_start_options() const {
  const api::AlgorithmSpec& a = plan_.algorithm;
  WarmStartOptions wo;
  wo.steps = plan_.warm_start_steps();
  wo.learning_rate = a.warm_start_learning_rate;
  wo.max_prompt_chars = a.warm_start_max_prompt_chars;
  wo.unmarked_answers = a.warm_start_unmarked_answers;
  wo.seed = plan_.seed();
  wo.max_response_tokens = a.max_response_tokens;
  wo.codec = p_.codec;
  wo.max_seq = p_.max_seq;
  return wo;
}

// A pretrained model's drafter learns from the model's own generations for the task (cached in
// cache_dir/drafter); a preset's, from the task's worked solutions, which are what it was
// warm-started to write.
Status PolicyBuilder::warm_start_drafter() {
  if (plan_.pretrained()) return warm_start_drafter_on_generations();
  WarmStartOptions dw = warm_start_options();
  dw.steps = plan_.drafter.warm_start_steps;
  dw.learning_rate = plan_.drafter_warm_start_learning_rate;
  dw.batch = plan_.drafter_warm_start_batch;
  dw.drafter_levels = plan_.drafter.train_levels;
  dw.max_response_tokens =
      std::min<int64_t>(plan_.algorithm.max_response_tokens, plan_.drafter_warm_start_max_tokens);
  std::ostringstream dkey;
  dkey << plan_.drafter.layers << "-" << dw.steps << "-" << dw.learning_rate << "-" << dw.batch
       << "-" << dw.max_response_tokens << "-" << dw.seed;
  if (dw.drafter_levels != 1) dkey << "-levels" << dw.drafter_levels;  // older keys stay valid
  if (p_.drafter->fused()) dkey << "-fused";
  std::string path =
      p_.warm_start_key + ".drafter-" + std::to_string(fnv1a64(dkey.str()) % 1000000007ull);
  log("drafter warm start: " + path);
  bool trained = false;
  return load_or_train_drafter_warm_start(p_.policy, p_.drafter, *p_.task, dw, path, &trained,
                                          cb_.drafter_warm_start);
}

Status PolicyBuilder::warm_start_drafter_on_generations() {
  GenerationsWarmStartOptions o;
  o.steps = plan_.drafter.warm_start_steps;
  o.learning_rate = plan_.drafter_warm_start_learning_rate;
  o.batch = plan_.drafter_warm_start_batch;
  o.seed = plan_.seed();
  o.prompts = plan_.drafter.warm_start_prompts;
  o.max_new_tokens =
      std::min<int64_t>(plan_.algorithm.max_response_tokens, plan_.drafter_warm_start_max_tokens);
  o.temperature = plan_.algorithm.temperature, o.top_p = plan_.algorithm.top_p;
  o.vocab_subset = plan_.drafter.vocab_subset;
  o.train_levels = plan_.drafter.train_levels;
  o.max_seq = p_.max_seq;
  o.codec = p_.codec;
  o.bfloat16 = o.train_bfloat16 = p_.bfloat16;
  o.log = [this](const std::string& s) { log(s); };
  // The target is the policy as RL starts: the model file, and its own warm start if it had one.
  std::string model_key = p_.model_key + (p_.warm_start.empty() ? "" : " " + p_.warm_start_key);
  StatusOr<GenerationsWarmStart> r =
      load_or_train_drafter_on_generations(p_.policy, p_.drafter, *p_.task, o, model_key,
                                           task_key(), plan_.cache_dir, cb_.drafter_warm_start);
  if (!r.ok()) return r.status();
  if (r->draft_vocab.defined()) {
    const int64_t* ids = r->draft_vocab.data_ptr<int64_t>();
    p_.drafter_vocab_ids.assign(ids, ids + r->draft_vocab.numel());
  }
  log("drafter warm start on the model's generations: " + r->cache_path + " (" +
      (r->trained ? "trained" : "loaded") + ", " + std::to_string(o.prompts) + " prompts, " +
      std::to_string(r->generated_tokens) + " generated tokens, " + std::to_string(o.train_levels) +
      " training levels, loss " + api::format_number(r->loss_first) + " -> " +
      api::format_number(r->loss_last) + ")");
  return Status::Ok();
}

}  // namespace

Status set_up_policy(const RLRunPlan& plan, const RunCallbacks& cb, std::function<bool()> cancelled,
                     PolicySetup* out) {
  return PolicyBuilder(plan, cb, std::move(cancelled), *out).build();
}

}  // namespace tlt::rl
