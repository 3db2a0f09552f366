#include "runtime/rl/run.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "api/validate.h"
#include "runtime/clock.h"
#include "runtime/cluster/job_secret.h"
#include "runtime/model/checkpoint.h"
#include "runtime/rl/checkpoint.h"
#include "runtime/rl/drafter_merge.h"
#include "runtime/rl/evaluation.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/policy_setup.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/rollout_phase.h"
#include "runtime/rl/run_dir.h"
#include "runtime/rl/samples.h"
#include "runtime/rl/scoring.h"
#include "runtime/rl/seeds.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/trainer_ranks.h"
#include "runtime/rl/weight_publisher.h"
#include "runtime/rl/worker_options.h"
#include "runtime/rl/worker_pool.h"
#include "runtime/torch_env.h"

namespace tlt::rl {
namespace fs = std::filesystem;
using nlohmann::json;
using runtime::now_s;

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
  // A held-out evaluation's responses on record (samples.jsonl), as after step `step`.
  void record_held_out(int64_t step, const HeldOutResult& h);
  json setup_message(int w);
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
  // The group of trainer ranks (plan_.trainer_ranks > 1), its ranks set up to train with `go`.
  Status start_trainer_ranks();
  // The other trainer ranks told to end, and waited for (a rank that failed is logged).
  void finish_trainer_ranks();
  // `s`, a failure of the trainer group during `what`, as the run's error: kTrainerGroupFailed
  // and the local rank processes that exited (`exited`, else TrainerRanks::exited()).
  Status group_failure(const Status& s, const std::string& what, std::string exited = "");
  Status save_checkpoint(int64_t step);
  Status load_checkpoint();
  void log(const std::string& s) {
    if (cb_.log) cb_.log(s);
  }

  RLRunPlan plan_;
  RunCallbacks cb_;
  const std::atomic<bool>* stop_;
  PolicySetup m_;  // the task, codec, policy, reference and drafter
  // The other trainer ranks (null with one); declared before trainer_, which borrows its group.
  std::unique_ptr<TrainerRanks> ranks_;
  std::unique_ptr<PolicyTrainer> trainer_;
  std::unique_ptr<reward::Scorer> scorer_;  // spec.reward: every batch of the run
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<RolloutPhase> rollout_;
  SampleLog samples_;  // plan_.samples_path: the scored responses (runtime/rl/samples.h)
  // The weight-sync group's generations and each step's publish (runtime/rl/weight_publisher.h).
  WeightPublisher weights_{plan_, [this](const std::string& m) { log(m); }};
  RLRunResult result_;
  int64_t start_step_ = 0;  // steps already done (resume)
  int64_t drafter_version_ = 0;
  int64_t last_saved_ = -1;
};

Status Driver::init_models() {
  Status set_up = set_up_policy(plan_, cb_, [this] { return stopping(); }, &m_);
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
  GrpoOptions go = grpo_options(plan_.algorithm, m_.bfloat16);
  go.cancelled = [this] { return stopping(); };
  log(std::string("precision (spec.model.dtype: ") + plan_.model.dtype + "): policy update " +
      (go.bfloat16 ? "with bfloat16 products, float32 weights and optimizer state" : "in float32") +
      "; rollouts decode " +
      (go.bfloat16 ? "with bfloat16 products (row-invariant forward: speculation stays lossless)"
                   : "in float32"));
  if (plan_.trainer_ranks > 1) TLT_RETURN_IF_ERROR(start_trainer_ranks());
  trainer_ = std::make_unique<PolicyTrainer>(m_.policy, m_.reference, go,
                                             ranks_ ? ranks_->group() : nullptr);
  result_.trainer_ranks = trainer_->world();
  Status synced = trainer_->synchronise();
  return synced.ok() ? synced : group_failure(synced, "sending the weights to the ranks");
}

Status Driver::start_trainer_ranks() {
  TrainerGroupOptions o;
  o.world = plan_.trainer_ranks;
  const char* timeout = std::getenv("TLT_COLLECTIVE_TIMEOUT_S");
  const int timeout_s = std::atoi(timeout ? timeout : "300");
  o.timeout_s = timeout_s > 0 ? timeout_s : 300;
  o.cuda = m_.policy->lm_head->weight.is_cuda();
  if (plan_.listen_port > 0) {  // the trainer pods: this one hosts the store
    o.port = plan_.trainer_group_port, o.host = plan_.trainer_group_host;
    StatusOr<std::string> secret = cluster::ensure_job_secret(false);
    if (!secret.ok()) return secret.status().with_context("trainer group");
    o.store_prefix = trainer_store_prefix(*secret);
  } else {
    std::error_code ec;
    fs::create_directories(plan_.trainer_dir, ec);
    if (ec) return Status::Unavailable(plan_.trainer_dir + ": " + ec.message());
  }
  StatusOr<std::unique_ptr<TrainerRanks>> ranks =
      TrainerRanks::start(o, plan_.trainer_job_file, plan_.trainer_dir, trainer_setup(plan_, m_));
  if (!ranks.ok()) return ranks.status();
  ranks_ = std::move(*ranks);
  log("trainer: " + std::to_string(o.world) + " ranks, data parallel over " +
      (o.cuda ? "NCCL" : "Gloo") + ", AdamW state sharded (ZeRO-1); " +
      (plan_.listen_port > 0 ? "the trainer pods joined"
                             : "ranks 1.." + std::to_string(o.world - 1) +
                                   " run beside this process, logs in " + plan_.trainer_dir) +
      "; a collective waits " + std::to_string(o.timeout_s) +
      " s for a rank (TLT_COLLECTIVE_TIMEOUT_S)");
  return Status::Ok();
}

Status Driver::group_failure(const Status& s, const std::string& what, std::string exited) {
  if (exited.empty() && ranks_) exited = ranks_->exited();
  if (!exited.empty()) exited = "; " + exited.substr(0, exited.size() - 1);
  std::string message = std::string(kTrainerGroupFailed) + " in " + what + ": " + s.message();
  return Status(s.code(), message + exited);
}

void Driver::finish_trainer_ranks() {
  if (!ranks_) return;
  Status told = trainer_->finish();
  std::string failed = ranks_->finish(told.ok() ? 60 : 5);
  if (!told.ok()) log("trainer group: " + told.message());
  if (!failed.empty()) log("trainer group: " + failed.substr(0, failed.size() - 1));
}

json Driver::setup_message(int w) {
  std::vector<int> cpus = runtime::allowed_cpus();
  WorkerOptions o;
  o.index = w;
  o.dir = plan_.run_dir;
  o.core = cpus[size_t(w) % cpus.size()];
  o.device = plan_.model.device;  // each worker takes its own share (runtime/device/device.h)
  o.preset = plan_.preset();
  o.vocab = kTextVocab;
  if (plan_.pretrained()) o.model_card = model::model_card_json(m_.card);
  o.max_seq = m_.max_seq;
  const int64_t rollout_workers = plan_.rollout_workers();
  o.max_batch = (plan_.algorithm.prompts_per_step + rollout_workers - 1) / rollout_workers *
                plan_.algorithm.group_size;
  o.seed = mix_seeds(plan_.seed(), 11);
  o.decode_bfloat16 = o.drafter_bfloat16 = m_.bfloat16;
  o.drafter_vocab_ids = m_.drafter_vocab_ids;
  o.speculative = plan_.speculative, o.drafter = plan_.drafter;
  json m = to_json(o);
  weights_.add_to_setup(w, &m);
  return m;
}

Status Driver::merge_drafters(const std::vector<std::pair<std::string, int64_t>>& parts) {
  StatusOr<int64_t> merged = merge_drafter_parts(m_.drafter, m_.policy, plan_.drafter.layers, parts,
                                                 [this](const std::string& m) { log(m); });
  if (!merged.ok()) return merged.status();
  if (*merged == 0) return Status::Ok();
  ++drafter_version_;
  return model::save_checkpoint(*m_.drafter, drafter_path(plan_.run_dir, drafter_version_),
                                "drafter v" + std::to_string(drafter_version_), io::Sync::kNone);
}

Status Driver::run_step(int64_t step, StepReport* r) {
  r->step = step;
  pool_->admit_drafter_pods(step);  // drafter pods that connected since the last step
  r->unpaired_connections = pool_->take_unpaired();
  TLT_RETURN_IF_ERROR(weights_.publish(step, *m_.policy, *m_.drafter, drafter_version_, r));
  StatusOr<Rollouts> s = rollout_->run(step, drafter_version_, r);
  if (!s.ok()) return s.status();
  TLT_RETURN_IF_ERROR(merge_drafters(s->drafter_parts));
  r->drafter_version = drafter_version_;
  int64_t g = plan_.algorithm.group_size;
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
  const size_t g = size_t(plan_.algorithm.group_size), b = responses.size();
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
        api::format_seconds(now_s() - t) + " for the rest");
  return scores;
}

Status Driver::update_policy(int64_t step, const std::vector<Problem>& problems,
                             const std::vector<std::vector<int64_t>>& prompts,
                             const std::vector<std::vector<int64_t>>& responses, StepReport* r) {
  int64_t g = plan_.algorithm.group_size, b = int64_t(responses.size());
  StatusOr<std::vector<double>> scores = step_rewards(step, problems, responses);
  if (!scores.ok()) return scores.status();
  samples_.record(step, "train", problems, prompts, responses, *scores,
                  [step](int64_t j) { return step_request_id(step, j); });
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
  if (!us.status.ok())
    return group_failure(us.status, "step " + std::to_string(step) + "'s policy update");
  result_.trainer_peak_rss_bytes = us.rank_peak_rss_bytes;
  result_.trainer_optimizer_bytes = us.rank_optimizer_bytes;
  if (us.cancelled)  // before the update's first optimizer step: the policy is the last step's
    return Status::Aborted("stopped during step " + std::to_string(step) +
                           "'s policy update, before it changed the policy");
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
  Status saved = save_rl_checkpoint(plan_.checkpoint_dir, plan_.checkpoint.keep, state, *trainer_,
                                    m_.drafter, m_.card);
  // A rank that died while its optimizer shard was gathered: the group's failure.
  std::string exited = !saved.ok() && ranks_ ? ranks_->exited() : "";
  if (!exited.empty())
    return group_failure(saved, "the checkpoint of step " + std::to_string(step), exited);
  TLT_RETURN_IF_ERROR(saved);
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
  TLT_RETURN_IF_ERROR(plan_.validate());
  const int64_t prompts = plan_.algorithm.prompts_per_step, workers = plan_.rollout_workers();
  if (prompts < workers)  // legal: the rebalancer's case for idle pods
    log("spec.algorithm.promptsPerStep (" + std::to_string(prompts) +
        ") is below spec.roles.rollout.replicas (" + std::to_string(workers) +
        "): " + std::to_string(workers - prompts) +
        " workers get no prompts; they train the drafter or sit idle");
  std::error_code ec;
  const std::string buffers = buffer_dir(plan_.run_dir);
  fs::create_directories(buffers, ec);
  if (ec) return Status::Unavailable(plan_.run_dir + ": " + ec.message());
  for (const auto& e : fs::directory_iterator(buffers, ec)) fs::remove(e, ec);
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
  int64_t held_out = std::min<int64_t>(plan_.held_out(), m_.task->held_out_count());
  return evaluate_held_out(std::move(model), *m_.task, held_out,
                           plan_.algorithm.max_response_tokens, plan_.algorithm.temperature,
                           kHeldOutSamples, plan_.seed(), m_.codec, rewards);
}

Status Driver::evaluate_before() {
  if (!result_.held_out_before_per_problem.empty()) return Status::Ok();
  StatusOr<HeldOutResult> before = evaluate(m_.reference);
  if (!before.ok()) return before.status();
  result_.held_out_before = before->reward;
  result_.held_out_before_per_problem = before->per_problem;
  result_.held_out_marked_before = before->marked;
  record_held_out(0, *before);
  log(std::string("held-out reward of the ") +
      (result_.warm_start.empty() ? "model as loaded" : "warm start") + " (" +
      std::to_string(plan_.held_out()) + " problems x " + std::to_string(kHeldOutSamples) +
      " samples): " + api::format_number(before->reward));
  return Status::Ok();
}

void Driver::record_held_out(int64_t step, const HeldOutResult& h) {
  const int64_t k = std::max<int64_t>(h.samples, 1);
  samples_.record(step, "heldout", h.evaluated, h.prompt_ids, h.response_ids, h.rewards,
                  [k](int64_t j) { return held_out_request_id(j / k, j % k); });
}

Status Driver::start_workers() {
  signal(SIGPIPE, SIG_IGN);
  WorkerPoolOptions po;
  po.workers = plan_.workers, po.rollout_workers = int(plan_.rollout_workers());
  po.worker_exe = plan_.worker_exe, po.run_dir = plan_.run_dir;
  po.listen_port = plan_.listen_port, po.listen_loopback = plan_.listen_loopback;
  po.connect_timeout_s = plan_.connect_timeout_s;
  po.drafter_pods_at_start = plan_.drafter_pods_at_start;
  po.drafter_start_grace_s = plan_.drafter_start_grace_s;
  po.stop = stop_;  // a signal ends the waits for workers (Aborted)
  pool_ = std::make_unique<WorkerPool>(
      po, [this](int w) { return setup_message(w); }, [this](const std::string& m) { log(m); });
  weights_.open(pool_.get());
  weights_.set_starting(true);
  Status started = pool_->start(start_step_ + 1);
  weights_.set_starting(false);
  TLT_RETURN_IF_ERROR(started);
  weights_.join_first();
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
  record_held_out(plan_.algorithm.steps, *after);
  // Fewer than 2 held-out problems (spec.task.heldOut) leave no spread to estimate: n stays 0.
  StatusOr<PairedDifference> d =
      paired_difference(result_.held_out_before_per_problem, result_.held_out_after_per_problem);
  if (d.ok()) result_.held_out_difference = *d;
  return Status::Ok();
}

StatusOr<RLRunResult> Driver::run() {
  TLT_RETURN_IF_ERROR(check_plan());
  TLT_RETURN_IF_ERROR(weights_.read_mode());
  Status init = init_models();
  if (init.code() == StatusCode::kAborted && stopping()) {  // a signal during the warm start
    log(init.message());
    result_.interrupted = true;
    return result_;
  }
  TLT_RETURN_IF_ERROR(init);
  if (plan_.resume) TLT_RETURN_IF_ERROR(load_checkpoint());
  samples_ = SampleLog(plan_.samples_path, plan_.report.samples, m_.codec,
                       plan_.algorithm.max_response_tokens, plan_.resume ? start_step_ : -1,
                       [this](const std::string& m) { log(m); });
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
  const int64_t steps = plan_.algorithm.steps;
  for (int64_t step = start_step_ + 1; step <= steps; ++step) {
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
    const int64_t every = plan_.checkpoint.every_steps;
    if ((every > 0 && step % every == 0) || step == steps)
      TLT_RETURN_IF_ERROR(save_checkpoint(step));
    if (stopping()) {
      result_.interrupted = step < steps;
      break;
    }
  }
  pool_->shutdown();
  if (result_.interrupted) {
    // The last completed step (reports of resumed runs carry the earlier steps too): a policy
    // update stops only before its first optimizer step, so the policy is still that step's.
    TLT_RETURN_IF_ERROR(
        save_checkpoint(result_.steps.empty() ? start_step_ : result_.steps.back().step));
    finish_trainer_ranks();
    return result_;
  }
  finish_trainer_ranks();
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
