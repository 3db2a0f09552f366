#include "runtime/rl/run.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "runtime/model/checkpoint.h"
#include "runtime/rl/checkpoint.h"
#include "runtime/rl/evaluation.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/policy_setup.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/rollout_phase.h"
#include "runtime/rl/scoring.h"
#include "runtime/rl/seeds.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/weight_sync.h"
#include "runtime/rl/worker_options.h"
#include "runtime/rl/worker_pool.h"
#include "runtime/torch_env.h"

namespace tlt::rl {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Held-out reward: the mean over this many samples per problem at the rollout temperature
// (what GRPO optimises), on the same seeds before and after training.
constexpr int64_t kHeldOutSamples = 4;

class Driver {
 public:
  Driver(const RLRunPlan& plan, const RunCallbacks& cb, const std::atomic<bool>* stop)
      : plan_(plan), cb_(cb), stop_(stop) {}
  StatusOr<RLRunResult> run();

 private:
  // The models (runtime/rl/policy_setup.h) and the policy trainer.
  Status init_models();
  Status check_plan();
  // `model`'s held-out rewards, on the same problems and sampling seeds for every model.
  StatusOr<HeldOutResult> evaluate(model::Transformer model) const;
  Status evaluate_before();
  Status start_workers();
  Status evaluate_after();
  json setup_message(int w);
  // TLT_WEIGHT_SYNC=gloo (the default; file: none): the weight-sync group of the driver (rank 0)
  // and the workers that hold weights (weight_holders), opened before the workers start (the
  // rollout workers' setup messages carry its port; drafter slots join the next generation) and
  // joined after. A group that cannot be opened or joined leaves the workers on the files.
  Status read_weight_sync_mode();
  Status open_weight_sync();
  // Rank 0's options for `world` ranks: a free port on 127.0.0.1 for local workers; for remote
  // ones the plan's weight_sync_port on every interface, waiting as long as for a pod to connect.
  WeightSyncOptions sync_options(int world) const;
  // Every rollout worker and each drafter slot present (a drafter pod that connected), in order.
  std::vector<int> weight_holders() const;
  // After worker w acknowledged a publish: the files of the versions it now holds need not
  // travel over its connection (Channel::mark_mirrored).
  void mark_held(int w, const json& reply);
  // Before step `step`'s rollout: broadcasts policy v(step - 1), and the drafter when it changed,
  // to the group's members and counts the refused publishes. When the members changed (a worker
  // restarted, a drafter pod joined or left) or the last generation broke, they first join a new
  // generation (regroup_weight_sync); a member that vanishes breaks the publish (a Gloo error or
  // the group's timeout), and the step goes on with the checkpoint files the generate message
  // names. After kMaxFailedGenerations generations in a row that do not form, the group is let
  // go for the rest of the run.
  Status publish_weights(int64_t step, StepReport* r);
  // A new generation (its own store; a fresh port locally, the same one on a cluster) that every
  // weight holder is asked, on its channel, to join; false when one does not join within the
  // rendezvous timeout.
  bool regroup_weight_sync();
  // Ends the current generation (closing rank 0's connections ends the members' part of a
  // broken publish at once); the next step boundary opens a new one.
  void break_weight_sync(const std::string& why);
  int64_t rollout_workers() const {
    return std::max<int64_t>(1, plan_.workers - plan_.drafter_role_workers);
  }
  bool stopping() const { return stop_ && stop_->load(); }
  // One RL step, as run.h's header numbers it: 1-3 (RolloutPhase), the drafters merged, 4.
  Status run_step(int64_t step, StepReport* report);
  // Step `step`'s rewards: the scorer's, the responses the rollout did not submit submitted now.
  StatusOr<std::vector<double>> step_rewards(int64_t step, const std::vector<Problem>& problems,
                                             const std::vector<std::vector<int64_t>>& responses);
  // 4. Rewards, advantages and the GRPO update; writes the next policy version.
  Status update_policy(int64_t step, const std::vector<Problem>& problems,
                       const std::vector<std::vector<int64_t>>& prompts,
                       const std::vector<std::vector<int64_t>>& responses, StepReport* r);
  Status merge_drafters(const std::vector<std::pair<std::string, int64_t>>& parts);
  Status save_checkpoint(int64_t step);
  Status load_checkpoint();
  void log(const std::string& s) {
    if (cb_.log) cb_.log(s);
  }

  RLRunPlan plan_;
  RunCallbacks cb_;
  const std::atomic<bool>* stop_;
  PolicySetup m_;  // the task, codec, policy, reference and drafter
  std::unique_ptr<PolicyTrainer> trainer_;
  std::unique_ptr<reward::Scorer> scorer_;  // spec.reward: every batch of the run
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<RolloutPhase> rollout_;
  static constexpr int kMaxFailedGenerations = 3;
  static constexpr int kSyncTimeoutS = 60;  // one broadcast of the group
  bool sync_wanted_ = false;                // TLT_WEIGHT_SYNC=gloo|nccl, not let go
  bool sync_cuda_ = false;                  // TLT_WEIGHT_SYNC=nccl: NCCL over CUDA tensors
  bool sync_file_ = false;                  // TLT_WEIGHT_SYNC=file: no group
  std::unique_ptr<WeightSync> sync_;        // null: no generation now; the workers load files
  std::vector<int> sync_members_;           // the workers of sync_, rank i + 1 for member i
  bool sync_starting_ = false;              // setup messages of the pool's start name the group
  bool sync_lost_ = false;                  // a worker was set up again: it is not in the group
  int64_t sync_generation_ = 0;             // groups opened so far
  int sync_failed_ = 0;                     // generations in a row that did not form
  int64_t synced_drafter_ = -1;             // the drafter version last published
  RLRunResult result_;
  int64_t start_step_ = 0;  // steps already done (resume)
  int64_t drafter_version_ = 0;
  int64_t last_saved_ = -1;
  bool update_cancelled_ = false;  // a signal stopped a policy update part-way
};

Status Driver::init_models() {
  Status set_up = set_up_policy(
      plan_, cb_, [this] { return stopping(); }, &m_);
  result_.warm_start = m_.warm_start;
  result_.warm_start_trained = m_.warm_start_trained;
  result_.prompts_skipped = m_.prompts_skipped, result_.prompts_truncated = m_.prompts_truncated;
  TLT_RETURN_IF_ERROR(set_up);
  StatusOr<std::unique_ptr<reward::Scorer>> scorer = make_run_scorer(plan_, *m_.task);
  if (!scorer.ok()) return scorer.status();
  scorer_ = std::move(*scorer);
  log("rewards (spec.reward.type: " + (plan_.reward.type.empty() ? "unset" : plan_.reward.type) +
      "): scored " +
      (serial_scoring() ? "after each rollout (TLT_REWARD_SERIAL=1)"
                        : "as each response finishes"));
  GrpoOptions go;
  go.learning_rate = plan_.learning_rate, go.clip = plan_.clip, go.kl_coef = plan_.kl_coef;
  go.temperature = plan_.temperature;
  go.cancelled = [this] { return stopping(); };
  go.aggregation = plan_.loss_aggregation == "sequence" ? LossAggregation::kSequenceMean
                                                        : LossAggregation::kTokenMean;
  go.bfloat16 = m_.bfloat16;
  log(std::string("precision (spec.model.dtype: ") + plan_.model_dtype + "): policy update " +
      (go.bfloat16 ? "with bfloat16 products, float32 weights and optimizer state" : "in float32") +
      "; rollouts decode " +
      (go.bfloat16 ? "with bfloat16 products (row-invariant forward: speculation stays lossless)"
                   : "in float32"));
  trainer_ = std::make_unique<PolicyTrainer>(m_.policy, m_.reference, go);
  return Status::Ok();
}

json Driver::setup_message(int w) {
  std::vector<int> cpus = runtime::allowed_cpus();
  WorkerOptions o;
  o.index = w;
  o.dir = plan_.run_dir;
  o.core = cpus[size_t(w) % cpus.size()];
  o.preset = plan_.preset;
  o.vocab = kTextVocab;
  if (!plan_.model_path.empty()) o.model_card = model::model_card_json(m_.card);
  o.max_seq = m_.max_seq;
  o.max_batch =
      (plan_.prompts_per_step + rollout_workers() - 1) / rollout_workers() * plan_.group_size;
  o.seed = mix_seeds(plan_.seed, 11);
  o.decode_bfloat16 = o.drafter_bfloat16 = m_.bfloat16;
  o.drafter_vocab_ids = m_.drafter_vocab_ids;
  o.spec = plan_.worker;
  json m = to_json(o);
  if (sync_starting_ && sync_ && w < rollout_workers())
    m["weight_sync"] = {{"port", sync_->port()},
                        {"rank", w + 1},
                        {"world", sync_->world()},
                        {"rendezvous_timeout_s", sync_options(1).rendezvous_timeout_s},
                        {"timeout_s", sync_options(1).timeout_s},
                        {"cuda", sync_cuda_}};
  else if (sync_wanted_)
    sync_lost_ = true;  // a restarted worker or a new drafter pod: it joins the next generation
  return m;
}

// TLT_WEIGHT_SYNC: gloo (unset), nccl or file; checked before any model loads.
Status Driver::read_weight_sync_mode() {
  const char* mode = std::getenv("TLT_WEIGHT_SYNC");
  std::string m = mode ? mode : "";
  if (!m.empty() && m != "gloo" && m != "nccl" && m != "file")
    return Status::InvalidArgument("TLT_WEIGHT_SYNC=" + m +
                                   ": expected gloo (the default), nccl or file");
  sync_file_ = m == "file";
  if (m == "nccl") {
#ifdef TLT_GPU
    // NCCL wants one device per rank: pods with a GPU each, not ranks sharing one GPU.
    sync_cuda_ = true;
#else
    return Status::InvalidArgument(
        "TLT_WEIGHT_SYNC=nccl needs the GPU flavour (built with TLT_GPU); use gloo");
#endif
  }
  return Status::Ok();
}

Status Driver::open_weight_sync() {
  if (sync_file_) return Status::Ok();
  WeightSyncOptions o = sync_options(int(rollout_workers()) + 1);
  StatusOr<std::unique_ptr<WeightSync>> s = WeightSync::open(o);
  if (!s.ok()) {
    log("weight sync: " + s.status().message() + "; the workers load checkpoint files");
    return Status::Ok();
  }
  sync_ = std::move(*s);
  sync_wanted_ = true;
  sync_generation_ = 1;
  for (int w = 0; w < rollout_workers(); ++w) sync_members_.push_back(w);
  log(std::string("weight sync: ") + (o.cuda ? "NCCL" : "Gloo") + " group of " +
      std::to_string(o.world) + " ranks on port " +
      std::to_string(sync_->port()));
  return Status::Ok();
}

WeightSyncOptions Driver::sync_options(int world) const {
  WeightSyncOptions o;
  o.rank = 0, o.world = world;
  // A member that vanishes mid-publish is noticed after this (a broadcast of one bucket takes
  // well under a second); TLT_WEIGHT_SYNC_TIMEOUT_S overrides it.
  o.timeout_s = kSyncTimeoutS;
  o.cuda = sync_cuda_;
  const char* timeout = std::getenv("TLT_WEIGHT_SYNC_TIMEOUT_S");
  if (timeout && std::atoi(timeout) > 0) o.timeout_s = std::atoi(timeout);
  if (plan_.listen_port > 0) {
    o.port = plan_.weight_sync_port;
    o.host = plan_.listen_loopback ? "127.0.0.1" : "0.0.0.0";
    o.rendezvous_timeout_s = plan_.connect_timeout_s;
  }
  return o;
}

std::vector<int> Driver::weight_holders() const {
  std::vector<int> ws;
  for (int w = 0; w < pool_->size(); ++w)
    if (w < rollout_workers() || pool_->present(w)) ws.push_back(w);
  return ws;
}

void Driver::mark_held(int w, const json& reply) {
  if (plan_.listen_port <= 0) return;  // local workers read the run directory's files
  Channel& ch = pool_->channel(w);
  int64_t pv = reply.value("policy_version", int64_t(-1));
  int64_t dv = reply.value("drafter_version", int64_t(-1));
  if (pv >= 0) ch.mark_mirrored(policy_path(plan_.run_dir, pv));
  if (dv >= 0) ch.mark_mirrored(drafter_path(plan_.run_dir, dv));
}

void Driver::break_weight_sync(const std::string& why) {
  log("weight sync: generation " + std::to_string(sync_generation_) + " broke: " + why +
      "; the workers load checkpoint files until the next generation");
  sync_.reset();
}

bool Driver::regroup_weight_sync() {
  sync_lost_ = false;
  sync_.reset();  // the old generation's store and connections
  sync_members_ = weight_holders();
  WeightSyncOptions o = sync_options(int(sync_members_.size()) + 1);
  o.rendezvous_timeout_s = 60;  // every member is connected: it joins at once
  ++sync_generation_;
  StatusOr<std::unique_ptr<WeightSync>> s = WeightSync::open(o);
  Status joined = s.ok() ? Status::Ok() : s.status();
  if (s.ok()) {
    sync_ = std::move(*s);
    for (size_t i = 0; i < sync_members_.size(); ++i) {
      json m = {{"op", "weight_sync"},
                {"port", sync_->port()},
                {"rank", int(i) + 1},
                {"world", o.world},
                {"rendezvous_timeout_s", o.rendezvous_timeout_s},
                {"timeout_s", o.timeout_s},
                {"cuda", o.cuda}};
      if (!pool_->send(sync_members_[i], m).ok()) break;  // the join below fails and says so
    }
    joined = sync_->join();
  }
  if (!joined.ok()) {
    sync_.reset();
    if (++sync_failed_ >= kMaxFailedGenerations) {
      sync_wanted_ = false;
      log("weight sync: generation " + std::to_string(sync_generation_) + ": " + joined.message() +
          "; the workers load checkpoint files from now on");
    } else {
      log("weight sync: generation " + std::to_string(sync_generation_) + ": " + joined.message() +
          "; the workers load checkpoint files this step");
    }
    return false;
  }
  sync_failed_ = 0;
  std::string ws;
  for (int w : sync_members_) ws += (ws.empty() ? "" : ",") + std::to_string(w);
  log("weight sync: group generation " + std::to_string(sync_generation_) + " of " +
      std::to_string(o.world) + " ranks (workers " + ws + ") on port " +
      std::to_string(sync_->port()));
  return true;
}

Status Driver::publish_weights(int64_t step, StepReport* r) {
  if (!sync_wanted_) return Status::Ok();
  double t = now_s();
  bool regroup = !sync_ || sync_lost_ || weight_holders() != sync_members_;
  if (regroup && !regroup_weight_sync()) {
    r->publish_seconds += now_s() - t;
    return Status::Ok();
  }
  int64_t dv = drafter_version_ != synced_drafter_ ? drafter_version_ : -1;
  json m = {{"op", "weights"}, {"policy_version", step - 1}, {"drafter_version", dv}};
  std::string error;
  std::vector<int> told;  // the members that take part: each replies
  for (int w : sync_members_) {
    Status st = pool_->present(w) ? pool_->send(w, m) : Status::Unavailable("gone");
    if (st.ok())
      told.push_back(w);
    else if (error.empty())
      error = "worker " + std::to_string(w) + ": " + st.message();
  }
  const char* corrupt = std::getenv("TLT_WEIGHT_SYNC_CORRUPT");  // a test hook: a policy version
  int64_t bad = corrupt && std::atoll(corrupt) == step - 1 ? 0 : -1;
  Status st = error.empty()
                  ? sync_->publish(WeightKind::kPolicy, step - 1, synced_tensors(*m_.policy), bad)
                  : Status::Unavailable(error);
  if (st.ok() && dv >= 0)
    st = sync_->publish(WeightKind::kDrafter, dv, synced_tensors(*m_.drafter));
  if (st.ok()) synced_drafter_ = drafter_version_;
  if (!st.ok()) {
    error = st.message();
    break_weight_sync(error);
  }
  for (int w : told) {
    StatusOr<std::optional<json>> reply =
        pool_->present(w) ? pool_->channel(w).receive(600 * 1000)
                          : StatusOr<std::optional<json>>(Status::Unavailable("gone"));
    if (!reply.ok() || !*reply || (**reply).value("op", "") != "weights") {
      if (error.empty()) error = "worker " + std::to_string(w) + " did not acknowledge";
      continue;
    }
    r->weight_sync_refused += (**reply).value("refused", int64_t(0));
    mark_held(w, **reply);
    std::string e = (**reply).value("error", "");
    if (!e.empty() && error.empty()) error = "worker " + std::to_string(w) + ": " + e;
  }
  r->publish_seconds += now_s() - t;
  if (sync_ && !error.empty()) break_weight_sync(error);
  return Status::Ok();
}

Status Driver::merge_drafters(const std::vector<std::pair<std::string, int64_t>>& parts) {
  torch::NoGradGuard no_grad;
  int64_t total = 0;
  for (const auto& [path, steps] : parts) total += steps;
  if (total == 0) return Status::Ok();
  std::vector<torch::Tensor> sum;
  for (auto& p : m_.drafter->parameters()) sum.push_back(torch::zeros_like(p));
  model::Drafter d(m_.policy, plan_.worker.drafter_layers,  // each part's weights, in turn
                   m_.drafter->features_mode());
  for (const auto& [path, steps] : parts) {
    StatusOr<std::string> meta = model::load_drafter_checkpoint(d, path);
    if (!meta.ok()) return meta.status();
    auto ps = d->parameters();
    for (size_t i = 0; i < ps.size(); ++i) sum[i] += ps[i] * (double(steps) / double(total));
  }
  auto mine = m_.drafter->parameters();
  for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(sum[i]);
  ++drafter_version_;
  return model::save_checkpoint(*m_.drafter, drafter_path(plan_.run_dir, drafter_version_),
                                "drafter v" + std::to_string(drafter_version_), io::Sync::kNone);
}

Status Driver::run_step(int64_t step, StepReport* r) {
  r->step = step;
  pool_->admit_drafter_pods(step);  // drafter pods that connected since the last step
  r->unpaired_connections = pool_->take_unpaired();
  TLT_RETURN_IF_ERROR(publish_weights(step, r));
  StatusOr<Rollouts> s = rollout_->run(step, drafter_version_, r);
  if (!s.ok()) return s.status();
  TLT_RETURN_IF_ERROR(merge_drafters(s->drafter_parts));
  r->drafter_version = drafter_version_;
  int64_t g = plan_.group_size;
  std::vector<std::vector<int64_t>> group_prompts;
  for (int64_t i = 0; i < int64_t(s->prompts.size()) * g; ++i)
    group_prompts.push_back(s->prompts[i / g]);
  TLT_RETURN_IF_ERROR(update_policy(step, s->problems, group_prompts, s->responses, r));
  r->step_seconds = now_s() - s->t0;
  return Status::Ok();
}

StatusOr<std::vector<double>> Driver::step_rewards(
    int64_t step, const std::vector<Problem>& problems,
    const std::vector<std::vector<int64_t>>& responses) {
  const size_t g = size_t(plan_.group_size), b = responses.size();
  if (serial_scoring()) scorer_->begin(b);  // the rollout opened no batch
  const size_t early = scorer_->scored();
  for (size_t i = 0; i < b; ++i) {
    if (scorer_->submitted(i)) continue;
    StatusOr<std::string> text = m_.codec->decode(responses[i]);
    if (!text.ok()) return text.status().with_context("step " + std::to_string(step));
    scorer_->submit(
        i, score_request(problems[i / g], step_request_id(step, int64_t(i)), std::move(*text)));
  }
  const double t = now_s();
  StatusOr<std::vector<double>> scores = scorer_->wait();
  if (!scores.ok())
    return scores.status().with_context("step " + std::to_string(step) + " rewards");
  if (plan_.reward.type == "command" || plan_.reward.type == "http")  // the others take no time
    log("step " + std::to_string(step) + " rewards: " + std::to_string(early) + " of " +
        std::to_string(b) + " scored by the end of the rollout; waited " +
        std::to_string(now_s() - t) + " s for the rest");
  return scores;
}

Status Driver::update_policy(int64_t step, const std::vector<Problem>& problems,
                             const std::vector<std::vector<int64_t>>& prompts,
                             const std::vector<std::vector<int64_t>>& responses, StepReport* r) {
  int64_t g = plan_.group_size, b = int64_t(responses.size());
  StatusOr<std::vector<double>> scores = step_rewards(step, problems, responses);
  if (!scores.ok()) return scores.status();
  std::vector<float> rewards(static_cast<size_t>(b), 0.f);
  std::vector<double> lens;
  for (int64_t i = 0; i < b; ++i) {
    rewards[i] = float((*scores)[size_t(i)]);
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
  Status saved = model::save_checkpoint(*m_.policy, policy_path(plan_.run_dir, step),
                                        "policy v" + std::to_string(step), io::Sync::kNone);
  r->publish_seconds += now_s() - t;  // with the broadcast of the step's weights, if any
  if (!saved.ok()) return saved;
  // Every worker loads this version next; the previous one is read by no one any more (a resumed
  // run republishes its checkpoint's policy), and a real model's is hundreds of MB a step.
  std::error_code ec;
  fs::remove(policy_path(plan_.run_dir, step - 1), ec);
  return Status::Ok();
}

Status Driver::save_checkpoint(int64_t step) {
  if (plan_.checkpoint_dir.empty() || step <= 0 || step == last_saved_) return Status::Ok();
  RLCheckpointState state;
  state.step = step, state.drafter_version = drafter_version_;
  state.held_out_before = result_.held_out_before;
  state.held_out_before_per_problem = result_.held_out_before_per_problem;
  state.held_out_marked_before = result_.held_out_marked_before;
  state.steps = result_.steps;
  TLT_RETURN_IF_ERROR(save_rl_checkpoint(plan_.checkpoint_dir, plan_.checkpoint_keep, state,
                                         *trainer_, m_.drafter, m_.card));
  last_saved_ = step;
  log("checkpoint: " + plan_.checkpoint_dir + "/step-" + std::to_string(step));
  return Status::Ok();
}

Status Driver::load_checkpoint() {
  std::string dir;
  StatusOr<RLCheckpointState> state =
      load_rl_checkpoint(plan_.checkpoint_dir, *trainer_, m_.drafter, &dir);
  if (!state.ok()) return state.status();
  start_step_ = state->step;
  drafter_version_ = state->drafter_version;
  result_.held_out_before = state->held_out_before;
  // Checkpoints written before the paired comparison lack it; run() re-evaluates the warm start.
  result_.held_out_before_per_problem = std::move(state->held_out_before_per_problem);
  result_.held_out_marked_before = state->held_out_marked_before;
  result_.steps = std::move(state->steps);
  last_saved_ = start_step_;
  log("resumed from " + dir + " after step " + std::to_string(start_step_));
  return Status::Ok();
}

Status Driver::check_plan() {
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
  return Status::Ok();
}

// The reference's held-out reward (the warm start, also after --resume), unless a checkpoint
// carried it.
StatusOr<HeldOutResult> Driver::evaluate(model::Transformer model) const {
  reward::Scorer* scorer = scorer_.get();
  HeldOutRewards rewards = [scorer](const std::vector<Problem>& problems, int64_t samples,
                                    const std::vector<std::string>& texts) {
    scorer->begin(texts.size());
    for (size_t j = 0; j < texts.size(); ++j) {
      int64_t p = int64_t(j) / samples, k = int64_t(j) % samples;
      scorer->submit(j, score_request(problems[size_t(p)], held_out_request_id(p, k), texts[j]));
    }
    return scorer->wait();
  };
  // A dataset's held-out file may hold fewer rows than spec.task.dataset.heldOut asks for.
  int64_t held_out = std::min<int64_t>(plan_.held_out, m_.task->held_out_count());
  return evaluate_held_out(std::move(model), *m_.task, held_out, plan_.max_response_tokens,
                           plan_.temperature, kHeldOutSamples, plan_.seed, m_.codec, rewards);
}

Status Driver::evaluate_before() {
  if (!result_.held_out_before_per_problem.empty()) return Status::Ok();
  StatusOr<HeldOutResult> before = evaluate(m_.reference);
  if (!before.ok()) return before.status();
  result_.held_out_before = before->reward;
  result_.held_out_before_per_problem = before->per_problem;
  result_.held_out_marked_before = before->marked;
  log(std::string("held-out reward of the ") +
      (result_.warm_start.empty() ? "model as loaded" : "warm start") + " (" +
      std::to_string(plan_.held_out) + " problems x " + std::to_string(kHeldOutSamples) +
      " samples): " + std::to_string(before->reward));
  return Status::Ok();
}

Status Driver::start_workers() {
  signal(SIGPIPE, SIG_IGN);
  WorkerPoolOptions po;
  po.workers = plan_.workers, po.rollout_workers = int(rollout_workers());
  po.worker_exe = plan_.worker_exe, po.run_dir = plan_.run_dir;
  po.listen_port = plan_.listen_port, po.listen_loopback = plan_.listen_loopback;
  po.connect_timeout_s = plan_.connect_timeout_s;
  po.drafter_pods_at_start = plan_.drafter_pods_at_start;
  po.drafter_start_grace_s = plan_.drafter_start_grace_s;
  po.stop = stop_;  // a signal ends the waits for workers (Aborted)
  pool_ = std::make_unique<WorkerPool>(
      po, [this](int w) { return setup_message(w); }, [this](const std::string& m) { log(m); });
  TLT_RETURN_IF_ERROR(open_weight_sync());
  sync_starting_ = true;
  Status started = pool_->start(start_step_ + 1);
  sync_starting_ = false;
  TLT_RETURN_IF_ERROR(started);
  if (sync_) {
    Status joined = sync_->join();
    if (joined.code() == StatusCode::kUnimplemented) {  // a build without Gloo: no generation forms
      sync_wanted_ = false;
      log("weight sync: " + joined.message() + "; the workers load checkpoint files from now on");
      sync_.reset();
    } else if (!joined.ok()) {
      break_weight_sync(joined.message());
    }
  }
  rollout_ = std::make_unique<RolloutPhase>(plan_, cb_, stop_, *pool_, *m_.task, *m_.codec,
                                            m_.max_seq, scorer_.get());
  return Status::Ok();
}

// The trained policy's held-out reward and its paired difference from the reference's.
Status Driver::evaluate_after() {
  StatusOr<HeldOutResult> after = evaluate(m_.policy);
  if (!after.ok()) return after.status();
  result_.held_out_after = after->reward;
  result_.held_out_after_per_problem = after->per_problem;
  result_.held_out_marked_after = after->marked;
  result_.held_out_samples = after->samples;
  // Fewer than 2 held-out problems (spec.task.heldOut) leave no spread to estimate: n stays 0.
  StatusOr<PairedDifference> d =
      paired_difference(result_.held_out_before_per_problem, result_.held_out_after_per_problem);
  if (d.ok()) result_.held_out_difference = *d;
  return Status::Ok();
}

StatusOr<RLRunResult> Driver::run() {
  TLT_RETURN_IF_ERROR(check_plan());
  TLT_RETURN_IF_ERROR(read_weight_sync_mode());
  Status init = init_models();
  if (init.code() == StatusCode::kAborted && stopping()) {  // a signal during the warm start
    log(init.message());
    result_.interrupted = true;
    return result_;
  }
  TLT_RETURN_IF_ERROR(init);
  if (plan_.resume) TLT_RETURN_IF_ERROR(load_checkpoint());
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*m_.policy, policy_path(plan_.run_dir, start_step_),
                                             "policy", io::Sync::kNone));
  TLT_RETURN_IF_ERROR(model::save_checkpoint(
      *m_.drafter, drafter_path(plan_.run_dir, drafter_version_), "drafter", io::Sync::kNone));
  TLT_RETURN_IF_ERROR(evaluate_before());
  Status started = start_workers();
  if (started.code() == StatusCode::kAborted && stopping()) {  // a signal while workers connect
    log(started.message());
    result_.interrupted = true;
    return result_;
  }
  TLT_RETURN_IF_ERROR(started);
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
  TLT_RETURN_IF_ERROR(evaluate_after());
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
