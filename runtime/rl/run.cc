#include "runtime/rl/run.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "api/fnv.h"
#include "runtime/cluster/coordinator.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/config.h"
#include "runtime/model/drafter.h"
#include "runtime/model/model_source.h"
#include "runtime/model/precision.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/channel.h"
#include "runtime/rl/drafter_on_generations.h"
#include "runtime/rl/evaluation.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/model_codec.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/seeds.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"
#include "runtime/rl/warm_start.h"
#include "runtime/rl/worker_pool.h"
#include "runtime/torch_env.h"
#include "runtime/io/atomic_file.h"

namespace tlt::rl {
namespace fs = std::filesystem;
using nlohmann::json;

json to_json(const StepReport& r) {
  json tl = json::array();
  for (const Interval& i : r.timeline)
    tl.push_back({{"worker", i.worker}, {"state", i.state}, {"start", i.start}, {"end", i.end}});
  return {{"step", r.step},
          {"rewardMean", r.reward_mean},
          {"responseTokens",
           {{"p50", r.len_p50}, {"p90", r.len_p90}, {"p99", r.len_p99}, {"max", r.len_max}}},
          {"rolloutSeconds", r.rollout_seconds},
          {"updateSeconds", r.update_seconds},
          {"publishSeconds", r.publish_seconds},
          {"updatePositions", r.update_positions},
          {"updateMicrobatches", r.update_microbatches},
          {"stepSeconds", r.step_seconds},
          {"generatingWorkerSeconds", r.generating_worker_seconds},
          {"idleWorkerSeconds", r.idle_worker_seconds},
          {"reclaimedWorkerSeconds", r.reclaimed_worker_seconds},
          {"acceptLength", r.accept_length},
          {"arms", r.arms},
          {"phaseSeconds", r.phase_seconds},
          {"copiedDrafts", r.copied_drafts},
          {"banditStepsAbsorbed", r.bandit_absorbed},
          {"draftVocabulary", r.draft_vocabulary},
          {"tokens", r.tokens},
          {"drafterVersion", r.drafter_version},
          {"drafterSteps", r.drafter_steps},
          {"drafterLoss", r.drafter_loss},
          {"stopLatencyMs", r.stop_latency_ms},
          {"kl", r.kl},
          {"clipFraction", r.clip_fraction},
          {"loss", r.loss},
          {"restarts", r.restarts},
          {"drafterWorkers", r.drafter_workers},
          {"timeline", tl}};
}

StepReport step_from_json(const json& j) {
  StepReport r;
  r.step = j.at("step");
  r.reward_mean = j.at("rewardMean");
  r.len_p50 = j.at("responseTokens").at("p50"), r.len_p90 = j.at("responseTokens").at("p90");
  r.len_p99 = j.at("responseTokens").at("p99"), r.len_max = j.at("responseTokens").at("max");
  r.rollout_seconds = j.at("rolloutSeconds"), r.update_seconds = j.at("updateSeconds");
  r.step_seconds = j.at("stepSeconds");
  r.publish_seconds = j.value("publishSeconds", 0.0);  // absent from older reports
  r.update_positions = j.value("updatePositions", int64_t(0));
  r.update_microbatches = j.value("updateMicrobatches", int64_t(0));
  r.generating_worker_seconds = j.at("generatingWorkerSeconds");
  r.idle_worker_seconds = j.at("idleWorkerSeconds");
  r.reclaimed_worker_seconds = j.at("reclaimedWorkerSeconds");
  r.accept_length = j.at("acceptLength");
  r.arms = j.at("arms").get<std::map<std::string, int64_t>>();
  r.phase_seconds = j.value("phaseSeconds", std::map<std::string, double>{});  // (older reports)
  r.copied_drafts = j.value("copiedDrafts", int64_t(0));  // absent from older reports
  r.bandit_absorbed = j.value("banditStepsAbsorbed", int64_t(0));
  r.draft_vocabulary = j.value("draftVocabulary", int64_t(0));
  r.tokens = j.at("tokens");
  r.drafter_version = j.at("drafterVersion"), r.drafter_steps = j.at("drafterSteps");
  r.drafter_loss = j.at("drafterLoss"), r.stop_latency_ms = j.at("stopLatencyMs");
  r.kl = j.at("kl"), r.clip_fraction = j.at("clipFraction"), r.loss = j.at("loss");
  r.restarts = j.at("restarts");
  r.drafter_workers = j.value("drafterWorkers", std::vector<int>{});
  for (const json& i : j.at("timeline"))
    r.timeline.push_back({i.at("worker"), i.at("state"), i.at("start"), i.at("end")});
  return r;
}

namespace {

// Held-out reward: the mean over this many samples per problem at the rollout temperature
// (what GRPO optimises), on the same seeds before and after training.
constexpr int64_t kHeldOutSamples = 4;

// RL draws training problems from this index of the training stream on, past those the warm
// start imitated (it reads the stream from 0), so rewards measure solving, not recall.
constexpr uint64_t kRlProblemOffset = uint64_t(1) << 32;

// The longest prompt an RLJob of a pretrained model is sized for, in tokens, chat template
// included (arithmetic-cot's longest, 40 operations, takes ~200 of SmolLM2's). The rollout
// engines' KV caches hold this plus spec.algorithm.maxResponseTokens per row, not the model's
// whole context (8192 positions of SmolLM2 would cost 377 MB per row).
constexpr int64_t kPromptBudget = 768;

// Positions a rollout engine keeps free past prompt + response for drafted tokens (the largest
// arm's tree; the engine refuses requests without it).
constexpr int64_t kDraftHeadroom = 64;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = size_t(std::ceil(q * double(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

// One step's rollout phase as the driver tracks it (steps 1-3 of run.h's header).
struct StepRun {
  int64_t step = 0;
  StepReport* report = nullptr;
  std::vector<Problem> problems;
  std::vector<std::vector<int64_t>> prompts;  // one per problem
  bool train_drafter = false;
  std::vector<json> gen_msgs;  // per worker: its generate message
  std::unique_ptr<cluster::Coordinator> coord;
  double t0 = 0;              // now_s() when the step began
  std::vector<double> since;  // per worker: when its current timeline state began
  std::vector<std::string> state;
  std::vector<std::vector<int64_t>> responses;  // per request id (prompt * G + k)
  std::vector<bool> done, awaiting_trained;
  // A worker without requests (dedicated to the drafter, or more workers than prompts) is
  // released at once: loading the new weights is not generating. Its reply only confirms them.
  std::vector<bool> no_requests;
  std::vector<std::pair<std::string, int64_t>> drafter_parts;  // (checkpoint, steps trained)
  int64_t accepted = 0, req_spec = 0;
  double rollout_end = -1;
  bool stop_sent = false;
};

class Driver {
 public:
  Driver(const RLRunPlan& plan, const RunCallbacks& cb, const std::atomic<bool>* stop)
      : plan_(plan), cb_(cb), stop_(stop) {}
  StatusOr<RLRunResult> run();

 private:
  Status init_models();
  // The policy (and an uninitialised reference of its shape): the preset with the ASCII codec,
  // or spec.model.path's model with its own tokenizer.
  Status make_preset_policy();
  Status load_model_policy();
  Status warm_start_policy();
  Status warm_start_drafter();
  Status warm_start_drafter_on_generations();
  WarmStartOptions warm_start_options() const;
  json setup_message(int w) const;
  int64_t rollout_workers() const {
    return std::max<int64_t>(1, plan_.workers - plan_.drafter_role_workers);
  }
  bool stopping() const { return stop_ && stop_->load(); }
  // One RL step, as run.h's header numbers it.
  Status run_step(int64_t step, StepReport* report);
  // 1. The step's prompts and every worker's generate message.
  StatusOr<StepRun> plan_step(int64_t step, StepReport* r);
  std::vector<bool> dedicated_workers(int64_t step, StepReport* r);
  // 1-2. Sends the requests; workers without any are released (and may train) at once.
  Status start_rollout(StepRun& s);
  // 2-3. Until every worker is done and every trainer stopped: results, deaths, training.
  Status run_rollout(StepRun& s);
  Status handle_worker(StepRun& s, int w, double t);
  Status worker_died(StepRun& s, int w, const Status& why, double t);
  Status on_generated(StepRun& s, int w, const json& m, double t);
  void on_trained(StepRun& s, int w, const json& m, double t);
  Status start_training(StepRun& s, const std::vector<int>& ws, double t);
  json buffers(const StepRun& s) const;
  void mark(StepRun& s, int w, const std::string& state, double t);
  // 3. Ends the rollout phase: idle accounting, the drafters merged, old buffers rotated out.
  Status finish_rollout(StepRun& s);
  // 4. Rewards, advantages and the GRPO update; writes the next policy version.
  Status update_policy(int64_t step, const std::vector<Problem>& problems,
                       const std::vector<std::vector<int64_t>>& prompts,
                       const std::vector<std::vector<int64_t>>& responses, StepReport* r);
  Status merge_drafters(const std::vector<std::pair<std::string, int64_t>>& parts);
  Status save_checkpoint(int64_t step);
  Status load_checkpoint();
  std::string policy_path(int64_t v) const {
    return plan_.run_dir + "/policy-v" + std::to_string(v) + ".ckpt";
  }
  std::string drafter_path(int64_t v) const {
    return plan_.run_dir + "/drafter-v" + std::to_string(v) + ".ckpt";
  }
  void log(const std::string& s) {
    if (cb_.log) cb_.log(s);
  }

  RLRunPlan plan_;
  RunCallbacks cb_;
  const std::atomic<bool>* stop_;
  std::unique_ptr<Task> task_;
  model::ModelConfig cfg_;
  model::ModelCard card_;             // written beside checkpoints (model.json) so that they export
  std::unique_ptr<Codec> own_codec_;  // a pretrained model's tokenizer
  const Codec* codec_ = &ascii_codec();  // own_codec_, or the presets' ASCII codec
  int64_t max_seq_ = 0;                  // positions the rollout engines are sized for
  bool bfloat16_ = false;       // spec.model.dtype: update and rollouts multiply in bfloat16
  std::string model_key_;       // the preset, or the model file's identity
  std::string warm_start_key_;  // the cached warm start's path (drafter's base)
  model::Transformer policy_{nullptr}, reference_{nullptr};
  model::Drafter drafter_{nullptr};
  // The drafter warm start's draft vocabulary (pretrained models): the workers' until they have
  // counted their own generations.
  std::vector<int64_t> drafter_vocab_ids_;
  std::unique_ptr<PolicyTrainer> trainer_;
  std::unique_ptr<WorkerPool> pool_;
  RLRunResult result_;
  int64_t start_step_ = 0;  // steps already done (resume)
  int64_t drafter_version_ = 0;
  int64_t last_saved_ = -1;
  bool killed_once_ = false;
  bool update_cancelled_ = false;  // a signal stopped a policy update part-way
  // Per worker: the bandit steps it measured in the last step, for the others (plan_step).
  std::vector<json> bandit_steps_;
  std::vector<int> last_drafter_workers_;  // as last logged
};

Status Driver::init_models() {
  StatusOr<std::unique_ptr<Task>> task =
      make_task(plan_.task, plan_.task_seed, TaskOptions{plan_.task_free_text});
  if (!task.ok()) return task.status();
  task_ = std::move(*task);
  TLT_RETURN_IF_ERROR(plan_.model_path.empty() ? make_preset_policy() : load_model_policy());
  TLT_RETURN_IF_ERROR(warm_start_policy());
  for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  reference_->eval();
  policy_->eval();
  torch::manual_seed(mix_seeds(plan_.seed, 7));
  drafter_ = model::Drafter(policy_, plan_.drafter_layers);
  // spec.model.dtype for the policy update and for decoding (a worker's engine still falls back
  // to float32 where its probe finds bfloat16 decoding not row-invariant,
  // rollout::EngineOptions::bfloat16), and for the drafter's training (warm start and spot
  // trainers: drafter::DrafterTrainer, 1.7x faster a step on SmolLM2); the drafter's warm start
  // learns the features decoding will hand it.
  bfloat16_ = model::use_bfloat16(plan_.model_dtype, !plan_.model_path.empty(),
                                  policy_->lm_head->weight.device());
  if (!plan_.baseline && plan_.drafter_warm_start_steps > 0)
    TLT_RETURN_IF_ERROR(warm_start_drafter());
  // The RNG state after initialisation must not depend on whether the drafter warm start ran
  // (the baseline skips it), so the two modes take the same random draws from here on.
  torch::manual_seed(mix_seeds(plan_.seed, 11));
  GrpoOptions go;
  go.learning_rate = plan_.learning_rate, go.clip = plan_.clip, go.kl_coef = plan_.kl_coef;
  go.temperature = plan_.temperature;
  go.cancelled = [this] { return stopping(); };
  go.aggregation = plan_.loss_aggregation == "sequence" ? LossAggregation::kSequenceMean
                                                        : LossAggregation::kTokenMean;
  go.bfloat16 = bfloat16_;
  log(std::string("precision (spec.model.dtype: ") + plan_.model_dtype + "): policy update " +
      (go.bfloat16 ? "with bfloat16 products, float32 weights and optimizer state" : "in float32") +
      "; rollouts decode " +
      (go.bfloat16 ? "with bfloat16 products (row-invariant forward: speculation stays lossless)"
                   : "in float32"));
  trainer_ = std::make_unique<PolicyTrainer>(policy_, reference_, go);
  return Status::Ok();
}

Status Driver::make_preset_policy() {
  StatusOr<model::ModelConfig> cfg = model::preset_config(plan_.preset, kTextVocab);
  if (!cfg.ok()) return cfg.status();
  cfg_ = *cfg;
  card_.config.architecture = "llama", card_.config.config = cfg_;
  max_seq_ = cfg_.max_seq;
  torch::manual_seed(plan_.seed);
  policy_ = model::Transformer(cfg_);
  reference_ = model::Transformer(cfg_);
  model_key_ = plan_.preset;
  return Status::Ok();
}

Status Driver::load_model_policy() {
  StatusOr<model::ModelSource> source =
      model::resolve_model_source(plan_.model_path, plan_.model_format);
  if (!source.ok()) return source.status().with_context("spec.model.path");
  if (source->kind == model::SourceKind::kHfConfig)
    return Status::InvalidArgument("spec.model.path: " + source->path +
                                   " is a config.json without weights; an RLJob starts from a "
                                   "trained model: a GGUF file, a Hugging Face directory or a tlt "
                                   "checkpoint");
  StatusOr<model::SourcedModel> loaded = model::load_model(*source);
  if (!loaded.ok()) return loaded.status().with_context("spec.model.path");
  policy_ = loaded->model;
  cfg_ = policy_->config();
  card_ = loaded->card;
  std::error_code ec;
  if (!card_.tokenizer.empty()) card_.tokenizer = fs::absolute(card_.tokenizer, ec).string();
  StatusOr<std::unique_ptr<ModelCodec>> codec = ModelCodec::load(*source, cfg_.vocab);
  if (!codec.ok()) return codec.status().with_context("spec.model.path");
  own_codec_ = std::move(*codec);
  codec_ = own_codec_.get();
  max_seq_ = std::min<int64_t>(cfg_.max_seq, kPromptBudget + plan_.max_response_tokens);
  torch::manual_seed(plan_.seed);
  reference_ = model::Transformer(cfg_);
  model_key_ = model::model_identity(source->path) + "-" + plan_.model_format;
  log("policy: " + source->path + " (" + card_.config.architecture + ", " +
      std::to_string(cfg_.n_layers) + " layers, width " + std::to_string(cfg_.dim) + ", vocab " +
      std::to_string(cfg_.vocab) + ", " + (codec_->has_chat() ? "chat template" : "plain prompts") +
      ")");
  return Status::Ok();
}

// The policy's supervised warm start (cached), and the reference: the warm start, or for a
// pretrained model without one (warm_start_steps 0) the model as loaded.
Status Driver::warm_start_policy() {
  WarmStartOptions wo = warm_start_options();
  std::ostringstream key;
  key << model_key_ << "-" << plan_.task << "-" << plan_.task_seed << "-" << wo.steps << "-"
      << wo.learning_rate << "-" << wo.batch << "-" << wo.max_response_tokens << "-"
      << wo.max_prompt_chars << "-" << wo.seed;
  if (wo.unmarked_answers > 0) key << "-unmarked" << wo.unmarked_answers;  // older keys unchanged
  warm_start_key_ = plan_.cache_dir + "/rl/warm-start-" +
                    std::to_string(fnv1a64(key.str()) % 1000000007ull) + ".ckpt";
  if (!plan_.model_path.empty() && wo.steps == 0) {
    log("warm start: none (spec.model.path is a trained model; set "
        "spec.algorithm.warmStartSteps to imitate the task's worked solutions first)");
    torch::NoGradGuard no_grad;
    auto from = policy_->named_parameters();
    for (auto& p : reference_->named_parameters()) p.value().copy_(from[p.key()]);
    return Status::Ok();
  }
  result_.warm_start = warm_start_key_;
  log("warm start: " + result_.warm_start);
  if (wo.unmarked_answers > 0 && plan_.task_free_text)
    log("note: spec.algorithm.warmStartUnmarkedAnswers leaves answers unmarked, but the reward "
        "also reads unmarked ones (spec.task.answer resolves to free-text), so RL has no marking "
        "to learn; set spec.task.answer: marker for that");
  wo.cancelled = [this] { return stopping(); };
  TLT_RETURN_IF_ERROR(load_or_train_warm_start(policy_, *task_, wo, result_.warm_start,
                                               &result_.warm_start_trained, cb_.warm_start));
  return model::load_checkpoint(*reference_, result_.warm_start).status();
}

WarmStartOptions Driver::warm_start_options() const {
  WarmStartOptions wo;
  wo.steps = plan_.warm_start_steps;
  wo.learning_rate = plan_.warm_start_learning_rate;
  wo.max_prompt_chars = plan_.warm_start_max_prompt_chars;
  wo.unmarked_answers = plan_.warm_start_unmarked_answers;
  wo.seed = plan_.seed;
  wo.max_response_tokens = plan_.max_response_tokens;
  wo.codec = codec_;
  wo.max_seq = max_seq_;
  return wo;
}

// A pretrained model's drafter learns from the model's own generations for the task (cached in
// cache_dir/drafter); a preset's, from the task's worked solutions, which are what it was
// warm-started to write.
Status Driver::warm_start_drafter() {
  if (!plan_.model_path.empty()) return warm_start_drafter_on_generations();
  WarmStartOptions dw = warm_start_options();
  dw.steps = plan_.drafter_warm_start_steps;
  dw.learning_rate = plan_.drafter_warm_start_learning_rate;
  dw.batch = plan_.drafter_warm_start_batch;
  dw.drafter_levels = plan_.drafter_train_levels;
  dw.max_response_tokens =
      std::min<int64_t>(plan_.max_response_tokens, plan_.drafter_warm_start_max_tokens);
  std::ostringstream dkey;
  dkey << plan_.drafter_layers << "-" << dw.steps << "-" << dw.learning_rate << "-" << dw.batch
       << "-" << dw.max_response_tokens << "-" << dw.seed;
  if (dw.drafter_levels != 1) dkey << "-levels" << dw.drafter_levels;  // older keys stay valid
  std::string path =
      warm_start_key_ + ".drafter-" + std::to_string(fnv1a64(dkey.str()) % 1000000007ull);
  log("drafter warm start: " + path);
  bool trained = false;
  return load_or_train_drafter_warm_start(policy_, drafter_, *task_, dw, path, &trained,
                                          cb_.drafter_warm_start);
}

Status Driver::warm_start_drafter_on_generations() {
  GenerationsWarmStartOptions o;
  o.steps = plan_.drafter_warm_start_steps;
  o.learning_rate = plan_.drafter_warm_start_learning_rate;
  o.batch = plan_.drafter_warm_start_batch;
  o.seed = plan_.seed;
  o.prompts = plan_.drafter_warm_start_prompts;
  o.max_new_tokens =
      std::min<int64_t>(plan_.max_response_tokens, plan_.drafter_warm_start_max_tokens);
  o.temperature = plan_.temperature, o.top_p = plan_.top_p;
  o.vocab_subset = plan_.drafter_vocab_subset;
  o.train_levels = plan_.drafter_train_levels;
  o.max_seq = max_seq_;
  o.codec = codec_;
  o.bfloat16 = o.train_bfloat16 = bfloat16_;
  // The target is the policy as RL starts: the model file, and its own warm start if it had one.
  std::string model_key = model_key_ + (result_.warm_start.empty() ? "" : " " + warm_start_key_);
  StatusOr<GenerationsWarmStart> r = load_or_train_drafter_on_generations(
      policy_, drafter_, *task_, o, model_key, plan_.task + "-" + std::to_string(plan_.task_seed),
      plan_.cache_dir, cb_.drafter_warm_start);
  if (!r.ok()) return r.status();
  if (r->draft_vocab.defined()) {
    const int64_t* ids = r->draft_vocab.data_ptr<int64_t>();
    drafter_vocab_ids_.assign(ids, ids + r->draft_vocab.numel());
  }
  log("drafter warm start on the model's generations: " + r->cache_path + " (" +
      (r->trained ? "trained" : "loaded") + ", " + std::to_string(o.prompts) + " prompts, " +
      std::to_string(r->generated_tokens) + " generated tokens, " + std::to_string(o.train_levels) +
      " training levels, loss " + std::to_string(r->loss_first) + " -> " +
      std::to_string(r->loss_last) + ")");
  return Status::Ok();
}

json Driver::setup_message(int w) const {
  std::vector<int> cpus = runtime::allowed_cpus();
  return {{"op", "setup"},
          {"index", w},
          {"dir", plan_.run_dir},
          {"core", cpus[size_t(w) % cpus.size()]},
          {"preset", plan_.preset},
          {"vocab", kTextVocab},
          {"model_card", plan_.model_path.empty() ? "" : model::model_card_json(card_)},
          {"max_seq", max_seq_},
          {"drafter_layers", plan_.drafter_layers},
          {"drafter_vocab", plan_.drafter_vocab_subset},
          {"drafter_vocab_ids", drafter_vocab_ids_},
          {"max_batch",
           (plan_.prompts_per_step + rollout_workers() - 1) / rollout_workers() * plan_.group_size},
          {"activation_threshold", plan_.activation_threshold},
          {"arms", plan_.arms},
          {"ngram_shortcut", plan_.ngram_shortcut},
          {"draft_confidence", plan_.draft_confidence},
          {"drafter_catch_up_limit", plan_.drafter_catch_up_limit},
          {"selector", plan_.selector},
          {"buckets", plan_.buckets},
          {"epsilon", plan_.epsilon},
          {"window", plan_.window},
          {"selector_value", plan_.selector_value},
          {"selector_exploration", plan_.selector_exploration},
          {"seed", mix_seeds(plan_.seed, 11)},
          {"drafter_lr", plan_.drafter_learning_rate},
          {"drafter_levels", plan_.drafter_train_levels},
          {"drafter_batch", plan_.drafter_batch},
          {"decode_bfloat16", bfloat16_},
          {"drafter_bfloat16", bfloat16_}};
}

Status Driver::merge_drafters(const std::vector<std::pair<std::string, int64_t>>& parts) {
  torch::NoGradGuard no_grad;
  int64_t total = 0;
  for (const auto& [path, steps] : parts) total += steps;
  if (total == 0) return Status::Ok();
  std::vector<torch::Tensor> sum;
  for (auto& p : drafter_->parameters()) sum.push_back(torch::zeros_like(p));
  model::Drafter d(policy_, plan_.drafter_layers);  // each part's weights, loaded in turn
  for (const auto& [path, steps] : parts) {
    StatusOr<std::string> meta = model::load_checkpoint(*d, path);
    if (!meta.ok()) return meta.status();
    auto ps = d->parameters();
    for (size_t i = 0; i < ps.size(); ++i) sum[i] += ps[i] * (double(steps) / double(total));
  }
  auto mine = drafter_->parameters();
  for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(sum[i]);
  ++drafter_version_;
  return model::save_checkpoint(*drafter_, drafter_path(drafter_version_),
                                "drafter v" + std::to_string(drafter_version_));
}

Status Driver::run_step(int64_t step, StepReport* r) {
  r->step = step;
  pool_->admit_drafter_pods(step);  // drafter pods that connected since the last step
  StatusOr<StepRun> planned = plan_step(step, r);
  if (!planned.ok()) return planned.status();
  StepRun& s = *planned;
  TLT_RETURN_IF_ERROR(start_rollout(s));
  TLT_RETURN_IF_ERROR(run_rollout(s));
  TLT_RETURN_IF_ERROR(finish_rollout(s));
  int64_t g = plan_.group_size;
  std::vector<std::vector<int64_t>> group_prompts;
  for (int64_t i = 0; i < int64_t(s.prompts.size()) * g; ++i)
    group_prompts.push_back(s.prompts[i / g]);
  TLT_RETURN_IF_ERROR(update_policy(step, s.problems, group_prompts, s.responses, r));
  r->step_seconds = now_s() - s.t0;
  return Status::Ok();
}

// Workers dedicated to the drafter this step (true) and those that generate. The last
// plan_.drafter_role_workers are drafter slots: always dedicated. Among the rollout workers,
// those the rebalancer assigned, keeping at least one generating (highest index dropped first).
// Present dedicated workers are listed in r->drafter_workers.
std::vector<bool> Driver::dedicated_workers(int64_t step, StepReport* r) {
  int64_t n = plan_.workers, rollout_n = n - plan_.drafter_role_workers;
  std::vector<bool> dedicated(size_t(n), false);
  if (cb_.drafter_assignments) {
    for (int w : cb_.drafter_assignments(step))
      if (w >= 0 && w < rollout_n) dedicated[size_t(w)] = true;
  }
  for (int64_t w = rollout_n - 1;
       w >= 0 && std::count(dedicated.begin(), dedicated.begin() + rollout_n, false) == 0; --w)
    dedicated[size_t(w)] = false;
  std::vector<int> assigned;
  for (int64_t w = 0; w < rollout_n; ++w)
    if (dedicated[size_t(w)]) assigned.push_back(int(w));
  if (assigned != last_drafter_workers_) {
    std::string ws;
    for (int w : assigned) ws += (ws.empty() ? "" : ", ") + std::to_string(w);
    log("step " + std::to_string(step) + ": workers dedicated to drafter training by the " +
        "rebalancer: " + (ws.empty() ? "none" : ws));
    last_drafter_workers_ = assigned;
  }
  for (int64_t w = rollout_n; w < n; ++w) dedicated[size_t(w)] = true;
  for (int64_t w = 0; w < n; ++w)
    if (dedicated[size_t(w)] && pool_->present(w)) r->drafter_workers.push_back(int(w));
  return dedicated;
}

StatusOr<StepRun> Driver::plan_step(int64_t step, StepReport* r) {
  StepRun s;
  s.step = step, s.report = r;
  int64_t p_count = plan_.prompts_per_step, g = plan_.group_size, n = plan_.workers;
  // This step's problems: a window of the training stream, so a resumed run sees the same.
  for (int64_t i = 0; i < p_count; ++i) {
    StatusOr<FittedProblem> f =
        fitting_problem(*task_, *codec_, kRlProblemOffset + uint64_t((step - 1) * p_count + i),
                        false, max_seq_ - plan_.max_response_tokens - kDraftHeadroom);
    if (!f.ok()) return f.status().with_context("step " + std::to_string(step));
    s.problems.push_back(std::move(f->problem));
    s.prompts.push_back(std::move(f->prompt));
  }
  bool speculate = !plan_.baseline && plan_.speculative;
  s.train_drafter = !plan_.baseline && plan_.drafter_training &&
                    (plan_.freeze_drafter_after < 0 || step <= plan_.freeze_drafter_after);
  std::vector<bool> dedicated = dedicated_workers(step, r);
  std::vector<int64_t> generators;
  for (int64_t w = 0; w < n; ++w)
    if (!dedicated[size_t(w)]) generators.push_back(w);
  // Prompts go round-robin over the generating workers, each with its whole group.
  s.gen_msgs.resize(size_t(n));
  for (int64_t w = 0; w < n; ++w) {
    json reqs = json::array();
    int64_t slot = std::find(generators.begin(), generators.end(), w) - generators.begin();
    int64_t n_gen = int64_t(generators.size());
    for (int64_t pi = slot; slot < n_gen && pi < p_count; pi += n_gen) {
      for (int64_t k = 0; k < g; ++k) {
        int64_t id = pi * g + k;
        reqs.push_back({{"id", id},
                        {"prompt", s.prompts[pi]},
                        {"max_new", plan_.max_response_tokens},
                        {"stop", codec_->end_ids().front()},
                        {"more_stop", std::vector<int64_t>(codec_->end_ids().begin() + 1,
                                                           codec_->end_ids().end())},
                        {"seed", mix_seeds(mix_seeds(plan_.seed, uint64_t(step)), uint64_t(id))},
                        {"temperature", plan_.temperature},
                        {"top_p", plan_.top_p}});
      }
    }
    json m = {{"op", "generate"},
              {"step", step},
              {"policy", policy_path(step - 1)},
              {"policy_version", step - 1},
              {"speculative", speculate},
              {"collect_hidden", s.train_drafter},
              {"requests", reqs}};
    if (speculate)
      m["drafter"] = drafter_path(drafter_version_), m["drafter_version"] = drafter_version_;
    if (speculate && plan_.selector_pooled) {
      // What the other workers' bandits measured in the last step (each step is passed on once).
      json peers = json::array();
      for (size_t v = 0; v < bandit_steps_.size(); ++v)
        if (v != size_t(w))
          for (const json& o : bandit_steps_[v]) peers.push_back(o);
      m["pool_bandit"] = true;
      m["bandit_peers"] = std::move(peers);
    }
    s.gen_msgs[size_t(w)] = std::move(m);
  }
  bandit_steps_.assign(size_t(n), json::array());
  return s;
}

Status Driver::start_rollout(StepRun& s) {
  int64_t n = plan_.workers;
  StepReport* r = s.report;
  s.coord = std::make_unique<cluster::Coordinator>(
      int(n), s.train_drafter ? plan_.min_idle_workers : std::numeric_limits<int>::max());
  // Without drafter training (--baseline, frozen drafter) a dedicated worker just sits idle.
  TLT_RETURN_IF_ERROR(
      s.coord->set_dedicated(s.train_drafter ? r->drafter_workers : std::vector<int>{}));
  std::vector<int> absent;
  for (int64_t w = 0; w < n; ++w)
    if (!pool_->present(w)) absent.push_back(int(w));
  TLT_RETURN_IF_ERROR(s.coord->set_absent(absent));
  s.t0 = now_s();
  TLT_RETURN_IF_ERROR(s.coord->begin_step(s.step, 0.0));
  s.since.assign(size_t(n), 0.0);
  s.state.assign(size_t(n), "generating");
  for (int64_t w = 0; w < n; ++w) TLT_RETURN_IF_ERROR(pool_->send(w, s.gen_msgs[w]));
  s.responses.resize(size_t(plan_.prompts_per_step * plan_.group_size));
  s.done.assign(size_t(n), false);
  s.awaiting_trained.assign(size_t(n), false);
  s.no_requests.assign(size_t(n), false);
  for (int64_t w = 0; w < n; ++w) {
    if (!pool_->present(w) || !s.gen_msgs[size_t(w)].at("requests").empty()) continue;
    s.no_requests[size_t(w)] = s.done[size_t(w)] = true;
    mark(s, int(w), "released", 0.0);
    StatusOr<std::vector<int>> train = s.coord->worker_done(int(w), 0.0);
    if (!train.ok()) return train.status();
    if (!s.coord->rollout_finished()) TLT_RETURN_IF_ERROR(start_training(s, *train, 0.0));
  }
  return Status::Ok();
}

void Driver::mark(StepRun& s, int w, const std::string& state, double t) {
  if (t > s.since[w]) s.report->timeline.push_back({w, s.state[w], s.since[w], t});
  s.state[w] = state, s.since[w] = t;
  if (cb_.worker_state) cb_.worker_state(w, state);
}

// Buffers available to drafter trainers: previous steps' and this step's finished workers.
json Driver::buffers(const StepRun& s) const {
  json files = json::array();
  for (int64_t st = std::max<int64_t>(1, s.step - plan_.buffer_steps + 1); st <= s.step; ++st)
    for (int64_t w = 0; w < plan_.workers; ++w) {
      std::string f =
          plan_.run_dir + "/buffer/step-" + std::to_string(st) + "-w" + std::to_string(w) + ".pt";
      if (fs::exists(f)) files.push_back(f);
    }
  return files;
}

Status Driver::start_training(StepRun& s, const std::vector<int>& ws, double t) {
  for (int w : ws) {
    mark(s, w, "training", t);
    s.awaiting_trained[w] = true;
    TLT_RETURN_IF_ERROR(
        pool_->send(w, {{"op", "train"}, {"step", s.step}, {"buffers", buffers(s)}}));
  }
  return Status::Ok();
}

Status Driver::run_rollout(StepRun& s) {
  const char* fault = std::getenv("TLT_FAULT_KILL_WORKER");
  int64_t kill_step = fault ? std::atoll(fault) : -1;
  auto any = [](const std::vector<bool>& v) {
    return std::find(v.begin(), v.end(), true) != v.end();
  };
  for (;;) {
    if (stopping()) return Status::Aborted("stopped by signal");
    double t = now_s() - s.t0;
    if (s.step == kill_step && !killed_once_ && !s.done[0] && pool_->pid(0) > 0) {  // mid-step
      killed_once_ = true;
      log("fault injection: killing rollout worker 0 (pid " + std::to_string(pool_->pid(0)) +
          ") mid-step");
      kill(pool_->pid(0), SIGKILL);
    }
    StatusOr<std::vector<int>> ready = pool_->wait_readable(20);
    if (!ready.ok()) return ready.status();
    t = now_s() - s.t0;
    for (int w : *ready) TLT_RETURN_IF_ERROR(handle_worker(s, w, t));
    if (!s.stop_sent && s.coord->rollout_finished()) {
      s.rollout_end = t;
      s.stop_sent = true;
      for (int64_t w = 0; w < plan_.workers; ++w)
        if (s.awaiting_trained[w])
          TLT_RETURN_IF_ERROR(pool_->send(w, {{"op", "stop"}, {"sent_at", now_s()}}));
    }
    // The step ends once every trainer stopped and every worker without requests confirmed the
    // step's weights (its reply must not spill into the next step).
    if (s.stop_sent && !any(s.awaiting_trained) && !any(s.no_requests)) return Status::Ok();
  }
}

Status Driver::handle_worker(StepRun& s, int w, double t) {
  Status st = pool_->channel(w).pump();
  if (!st.ok() && !pool_->channel(w).has_buffered()) return worker_died(s, w, st, t);
  while (std::optional<json> m = pool_->channel(w).pop()) {
    std::string op = m->value("op", "");
    if (op == "generated") {
      TLT_RETURN_IF_ERROR(on_generated(s, w, *m, t));
    } else if (op == "trained") {
      on_trained(s, w, *m, t);
    } else {
      return Status::Internal("unexpected worker message " + m->dump().substr(0, 120));
    }
  }
  return Status::Ok();
}

Status Driver::worker_died(StepRun& s, int w, const Status& why, double t) {
  if (pool_->optional(w)) {
    // A drafter pod went away (deleted by a scale-down, or failed): the step goes on without
    // it; the training it had not handed back is lost.
    pool_->drop(w, why.message());
    TLT_RETURN_IF_ERROR(s.coord->worker_left(w, t));
    s.awaiting_trained[size_t(w)] = false;
    s.no_requests[size_t(w)] = false;
    mark(s, w, "idle", t);
    return Status::Ok();
  }
  // The worker died: restart it (remote: wait for it to connect again) and rerun what it had
  // not finished.
  ++s.report->restarts;
  log("rollout worker " + std::to_string(w) + " died (" + why.message() + "); restarting");
  TLT_RETURN_IF_ERROR(pool_->restart(w));
  bool was_generating = s.coord->state(w) == cluster::WorkerState::kGenerating;
  StatusOr<std::vector<int>> again = s.coord->worker_restarted(w, t);
  if (!again.ok()) return again.status();
  if (was_generating) return pool_->send(w, s.gen_msgs[w]);
  // A worker without requests that had not confirmed the weights yet: ask again.
  if (s.no_requests[size_t(w)]) TLT_RETURN_IF_ERROR(pool_->send(w, s.gen_msgs[w]));
  if (s.awaiting_trained[w]) mark(s, w, "released", t);
  s.awaiting_trained[w] = false;
  if (!s.stop_sent) TLT_RETURN_IF_ERROR(start_training(s, *again, t));
  return Status::Ok();
}

Status Driver::on_generated(StepRun& s, int w, const json& m, double t) {
  if (m.at("policy_version").get<int64_t>() != s.step - 1)
    return Status::Internal("worker generated with policy version " +
                            m.at("policy_version").dump());
  if (s.no_requests[size_t(w)]) {  // released at the start of the step: only the reply
    s.no_requests[size_t(w)] = false;
    return Status::Ok();
  }
  StepReport* r = s.report;
  for (const json& c : m.at("completions"))
    s.responses[c.at("id").get<size_t>()] = c.at("tokens").get<std::vector<int64_t>>();
  const json& st = m.at("stats");
  r->tokens += st.at("tokens").get<int64_t>();
  s.accepted += st.at("accepted").get<int64_t>();
  s.req_spec += st.at("request_spec_steps").get<int64_t>();
  for (auto& [arm, c] : st.at("arms").items()) r->arms[arm] += c.get<int64_t>();
  if (st.contains("phases"))  // absent from older workers
    for (auto& [phase, sec] : st.at("phases").items()) r->phase_seconds[phase] += sec.get<double>();
  r->copied_drafts += st.value("copied", int64_t(0));
  r->bandit_absorbed += st.value("bandit_absorbed", int64_t(0));
  if (st.contains("bandit") && size_t(w) < bandit_steps_.size())
    bandit_steps_[size_t(w)] = st.at("bandit");
  r->draft_vocabulary = std::max(r->draft_vocabulary, st.value("draft_vocab", int64_t(0)));
  s.done[w] = true;
  r->generating_worker_seconds += t;
  mark(s, w, "released", t);
  StatusOr<std::vector<int>> train = s.coord->worker_done(w, t);
  if (!train.ok()) return train.status();
  // The last worker to finish ends the rollout phase: nobody starts training then.
  if (!s.stop_sent && !s.coord->rollout_finished())
    TLT_RETURN_IF_ERROR(start_training(s, *train, t));
  return Status::Ok();
}

void Driver::on_trained(StepRun& s, int w, const json& m, double t) {
  StepReport* r = s.report;
  s.awaiting_trained[w] = false;
  mark(s, w, "released", t);
  int64_t steps = m.at("steps").get<int64_t>();
  r->drafter_steps += steps;
  if (steps > 0) {
    s.drafter_parts.push_back({m.at("drafter").get<std::string>(), steps});
    r->drafter_loss = m.at("loss_last").get<double>();
  }
  r->stop_latency_ms = std::max(r->stop_latency_ms, 1000.0 * m.at("stop_latency_s").get<double>());
}

Status Driver::finish_rollout(StepRun& s) {
  StepReport* r = s.report;
  int64_t n = plan_.workers;
  StatusOr<std::vector<int>> preempted = s.coord->end_step(s.rollout_end);
  if (!preempted.ok()) return preempted.status();
  r->idle_worker_seconds = s.coord->idle_seconds();
  r->reclaimed_worker_seconds = s.coord->reclaimed_seconds();
  for (int64_t w = 0; w < n; ++w)
    if (pool_->present(w)) mark(s, int(w), "idle", now_s() - s.t0);
  r->rollout_seconds = s.rollout_end;
  r->accept_length = s.req_spec ? double(s.accepted + s.req_spec) / double(s.req_spec) : 0.0;
  TLT_RETURN_IF_ERROR(merge_drafters(s.drafter_parts));
  r->drafter_version = drafter_version_;
  // Old buffers rotate out.
  std::error_code ec;
  for (int64_t w = 0; w < n; ++w)
    fs::remove(plan_.run_dir + "/buffer/step-" + std::to_string(s.step - plan_.buffer_steps) +
                   "-w" + std::to_string(w) + ".pt",
               ec);
  return Status::Ok();
}

Status Driver::update_policy(int64_t step, const std::vector<Problem>& problems,
                             const std::vector<std::vector<int64_t>>& prompts,
                             const std::vector<std::vector<int64_t>>& responses, StepReport* r) {
  int64_t g = plan_.group_size, b = int64_t(responses.size());
  std::vector<float> rewards(static_cast<size_t>(b), 0.f);
  std::vector<double> lens;
  for (int64_t i = 0; i < b; ++i) {
    StatusOr<std::string> text = codec_->decode(responses[i]);
    if (!text.ok()) return text.status().with_context("step " + std::to_string(step));
    rewards[i] = float(task_->reward(problems[i / g], *text));
    lens.push_back(double(responses[i].size()));
    r->reward_mean += rewards[i] / double(b);
  }
  r->len_p50 = percentile(lens, 0.5), r->len_p90 = percentile(lens, 0.9);
  r->len_p99 = percentile(lens, 0.99), r->len_max = percentile(lens, 1.0);
  torch::Tensor adv = group_advantages(torch::tensor(rewards).view({b / g, g})).view({b});  // (B,)
  SequenceBatch batch = make_batch(prompts, responses);
  UpdateStats us = trainer_->update(batch, adv);
  if (us.cancelled) {
    update_cancelled_ = true;  // the policy is part-way through the step: not a checkpoint
    return Status::Aborted("stopped during step " + std::to_string(step) + "'s policy update");
  }
  r->update_seconds = us.seconds, r->kl = us.kl, r->clip_fraction = us.clip_fraction;
  r->loss = us.loss;
  r->update_positions = us.positions, r->update_microbatches = us.microbatches;
  double t = now_s();
  Status saved =
      model::save_checkpoint(*policy_, policy_path(step), "policy v" + std::to_string(step));
  r->publish_seconds = now_s() - t;
  if (!saved.ok()) return saved;
  // Every worker loads this version next; the previous one is read by no one any more (a resumed
  // run republishes its checkpoint's policy), and a real model's is hundreds of MB a step.
  std::error_code ec;
  fs::remove(policy_path(step - 1), ec);
  return Status::Ok();
}

Status Driver::save_checkpoint(int64_t step) {
  if (plan_.checkpoint_dir.empty() || step <= 0 || step == last_saved_) return Status::Ok();
  std::string dir = plan_.checkpoint_dir + "/step-" + std::to_string(step);
  TLT_RETURN_IF_ERROR(trainer_->save(dir, "rl step " + std::to_string(step)));
  // The policy's architecture and tokenizer beside step-N/, so `tlt export` reads it back.
  TLT_RETURN_IF_ERROR(model::write_model_card(plan_.checkpoint_dir, card_));
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*drafter_, dir + "/drafter.ckpt",
                                             "drafter v" + std::to_string(drafter_version_)));
  json steps = json::array();
  for (const StepReport& s : result_.steps) steps.push_back(to_json(s));
  json state = {{"step", step},
                {"drafterVersion", drafter_version_},
                {"heldOutBefore", result_.held_out_before},
                {"heldOutBeforePerProblem", result_.held_out_before_per_problem},
                {"heldOutMarkedBefore", result_.held_out_marked_before},
                {"steps", steps}};
  TLT_RETURN_IF_ERROR(io::atomic_write(dir + "/state.json", state.dump() + "\n"));
  // `latest` names a complete step directory only once everything in it is in place.
  TLT_RETURN_IF_ERROR(
      io::atomic_write(plan_.checkpoint_dir + "/latest", "step-" + std::to_string(step) + "\n"));
  std::error_code ec;
  last_saved_ = step;
  // Keep the newest `keep` checkpoints.
  std::vector<int64_t> have;
  for (const auto& e : fs::directory_iterator(plan_.checkpoint_dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0) have.push_back(std::atoll(name.c_str() + 5));
  }
  std::sort(have.begin(), have.end());
  for (size_t i = 0; i + size_t(plan_.checkpoint_keep) < have.size(); ++i)
    fs::remove_all(plan_.checkpoint_dir + "/step-" + std::to_string(have[i]), ec);
  log("checkpoint: " + dir);
  return Status::Ok();
}

Status Driver::load_checkpoint() {
  std::ifstream latest(plan_.checkpoint_dir + "/latest");
  std::string name;
  if (!(latest >> name))
    return Status::NotFound("no checkpoint to resume under " + plan_.checkpoint_dir +
                            " (spec.checkpoint.path); run without --resume to start over");
  std::string dir = plan_.checkpoint_dir + "/" + name;
  StatusOr<std::string> meta = trainer_->load(dir);
  if (!meta.ok()) return meta.status().with_context("resume from " + dir);
  StatusOr<std::string> dm = model::load_checkpoint(*drafter_, dir + "/drafter.ckpt");
  if (!dm.ok()) return dm.status().with_context("resume from " + dir);
  std::ifstream f(dir + "/state.json");
  json state = json::parse(f, nullptr, false);
  if (state.is_discarded() || !state.contains("step"))
    return Status::Corruption(dir + "/state.json is not a tlt RL state; delete " + dir +
                              " to resume from an older checkpoint");
  try {
    start_step_ = state.at("step");
    drafter_version_ = state.at("drafterVersion");
    result_.held_out_before = state.at("heldOutBefore");
    // Checkpoints written before the paired comparison lack it; run() re-evaluates the warm start.
    if (state.contains("heldOutBeforePerProblem"))
      state.at("heldOutBeforePerProblem").get_to(result_.held_out_before_per_problem);
    result_.held_out_marked_before = state.value("heldOutMarkedBefore", -1.0);
    for (const json& s : state.at("steps")) result_.steps.push_back(step_from_json(s));
  } catch (const json::exception& e) {
    return Status::Corruption(dir + "/state.json: " + e.what());
  }
  last_saved_ = start_step_;
  log("resumed from " + dir + " after step " + std::to_string(start_step_));
  return Status::Ok();
}

StatusOr<RLRunResult> Driver::run() {
  if (plan_.run_dir.empty()) return Status::InvalidArgument("run directory is empty");
  if (plan_.drafter_role_workers < 0 || plan_.drafter_role_workers >= plan_.workers)
    return Status::InvalidArgument("spec.roles.rollout.replicas must be at least 1 besides " +
                                   std::to_string(plan_.drafter_role_workers) + " drafter pods");
  if (plan_.prompts_per_step < rollout_workers())  // legal: the rebalancer's case for idle pods
    log("spec.algorithm.promptsPerStep (" + std::to_string(plan_.prompts_per_step) +
        ") is below spec.roles.rollout.replicas (" + std::to_string(rollout_workers()) +
        "): " + std::to_string(rollout_workers() - plan_.prompts_per_step) +
        " workers get no prompts; they train the drafter or sit idle");
  std::error_code ec;
  fs::create_directories(plan_.run_dir + "/buffer", ec);
  if (ec) return Status::Unavailable(plan_.run_dir + ": " + ec.message());
  for (const auto& e : fs::directory_iterator(plan_.run_dir + "/buffer", ec)) fs::remove(e, ec);
  Status init = init_models();
  if (init.code() == StatusCode::kAborted && stopping()) {  // a signal during the warm start
    log(init.message());
    result_.interrupted = true;
    return result_;
  }
  TLT_RETURN_IF_ERROR(init);
  if (plan_.resume) TLT_RETURN_IF_ERROR(load_checkpoint());
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*policy_, policy_path(start_step_), "policy"));
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*drafter_, drafter_path(drafter_version_), "drafter"));
  if (result_.held_out_before_per_problem.empty()) {
    // The reference is the warm start, also after --resume.
    StatusOr<HeldOutResult> before =
        evaluate_held_out(reference_, *task_, plan_.held_out, plan_.max_response_tokens,
                          plan_.temperature, kHeldOutSamples, plan_.seed, codec_);
    if (!before.ok()) return before.status();
    result_.held_out_before = before->reward;
    result_.held_out_before_per_problem = before->per_problem;
    result_.held_out_marked_before = before->marked;
    log(std::string("held-out reward of the ") +
        (result_.warm_start.empty() ? "model as loaded" : "warm start") + " (" +
        std::to_string(plan_.held_out) + " problems x " + std::to_string(kHeldOutSamples) +
        " samples): " + std::to_string(before->reward));
  }
  signal(SIGPIPE, SIG_IGN);
  WorkerPoolOptions po;
  po.workers = plan_.workers, po.rollout_workers = int(rollout_workers());
  po.worker_exe = plan_.worker_exe, po.run_dir = plan_.run_dir;
  po.listen_port = plan_.listen_port, po.listen_loopback = plan_.listen_loopback;
  po.connect_timeout_s = plan_.connect_timeout_s;
  po.drafter_pods_at_start = plan_.drafter_pods_at_start;
  po.drafter_start_grace_s = plan_.drafter_start_grace_s;
  pool_ = std::make_unique<WorkerPool>(
      po, [this](int w) { return setup_message(w); }, [this](const std::string& m) { log(m); });
  TLT_RETURN_IF_ERROR(pool_->start(start_step_ + 1));
  for (int64_t step = start_step_ + 1; step <= plan_.steps; ++step) {
    StepReport r;
    Status st = run_step(step, &r);
    if (st.code() == StatusCode::kAborted && stopping()) {
      log(st.message());
      result_.interrupted = true;
      break;
    }
    TLT_RETURN_IF_ERROR(st);
    result_.steps.push_back(r);
    if (cb_.step) cb_.step(r);
    bool due = plan_.checkpoint_every > 0 && step % plan_.checkpoint_every == 0;
    if (due || step == plan_.steps) TLT_RETURN_IF_ERROR(save_checkpoint(step));
    if (stopping()) {
      result_.interrupted = step < plan_.steps;
      break;
    }
  }
  pool_->shutdown();
  if (result_.interrupted) {
    // The last completed step (reports of resumed runs carry the earlier steps too), unless the
    // policy is part-way through the next one: then the checkpoints already written stand.
    if (!update_cancelled_)
      TLT_RETURN_IF_ERROR(
          save_checkpoint(result_.steps.empty() ? start_step_ : result_.steps.back().step));
    return result_;
  }
  StatusOr<HeldOutResult> after =
      evaluate_held_out(policy_, *task_, plan_.held_out, plan_.max_response_tokens,
                        plan_.temperature, kHeldOutSamples, plan_.seed, codec_);
  if (!after.ok()) return after.status();
  result_.held_out_after = after->reward;
  result_.held_out_after_per_problem = after->per_problem;
  result_.held_out_marked_after = after->marked;
  result_.held_out_samples = after->samples;
  // Fewer than 2 held-out problems (spec.task.heldOut) leave no spread to estimate: n stays 0.
  StatusOr<PairedDifference> d =
      paired_difference(result_.held_out_before_per_problem, result_.held_out_after_per_problem);
  if (d.ok()) result_.held_out_difference = *d;
  return result_;
}

}  // namespace

StatusOr<RLRunResult> run_rl(const RLRunPlan& plan, const RunCallbacks& callbacks,
                             const std::atomic<bool>* stop) {
  Driver d(plan, callbacks, stop);
  try {
    return d.run();
  } catch (const std::exception& e) {
    return Status::Internal(std::string("rl run: ") + e.what());
  }
}

}  // namespace tlt::rl
