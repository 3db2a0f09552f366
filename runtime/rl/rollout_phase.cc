#include "runtime/rl/rollout_phase.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "runtime/clock.h"
#include "runtime/cluster/coordinator.h"
#include "runtime/rl/run_dir.h"
#include "runtime/rl/scoring.h"
#include "runtime/rl/seeds.h"

namespace tlt::rl {
namespace fs = std::filesystem;
using nlohmann::json;
using runtime::now_s;

namespace {

// A checked message's effect: only a refused message is InvalidArgument (the caller treats the
// worker as failed); a failure while applying one is the driver's own.
Status applied(const Status& st) {
  return st.code() == StatusCode::kInvalidArgument ? Status::Internal(st.message()) : st;
}

// RL draws training problems from this index of the training stream on, past those the warm
// start imitated (it reads the stream from 0), so rewards measure solving, not recall.
constexpr uint64_t kRlProblemOffset = uint64_t(1) << 32;

// Positions a rollout engine keeps free past prompt + response for drafted tokens (the largest
// arm's tree; the engine refuses requests without it).
constexpr int64_t kDraftHeadroom = 64;

}  // namespace

// One step's rollout phase as the driver tracks it (steps 1-3 of run.h's header).
struct RolloutPhase::StepRun {
  int64_t step = 0;
  StepReport* report = nullptr;
  std::vector<Problem> problems;
  std::vector<std::vector<int64_t>> prompts;  // one per problem
  bool train_drafter = false;
  std::vector<GenerateMessage> gen_msgs;  // per worker: its generate message
  // Per worker: what its replies are checked against (the request ids it was sent, which of
  // them it answered since it last (re)started), and how often it failed this step.
  std::vector<StepReplyContext> replies;
  std::vector<int> restarts;
  std::unique_ptr<cluster::Coordinator> coord;
  double t0 = 0;              // now_s() when the step began
  std::vector<double> since;  // per worker: when its current timeline state began
  std::vector<std::string> state;
  std::vector<std::vector<int64_t>> responses;  // per request id (prompt * G + k)
  // Per request id: handed to the scorer. Its response is final then: a worker restarted
  // mid-step regenerates it, and the first version (same policy, same request) is kept.
  std::vector<bool> submitted;
  std::vector<bool> done, awaiting_trained;
  // A worker without requests (dedicated to the drafter, or more workers than prompts) is
  // released at once: loading the new weights is not generating. Its reply only confirms them.
  std::vector<bool> no_requests;
  std::vector<std::pair<std::string, int64_t>> drafter_parts;  // (checkpoint, steps trained)
  int64_t accepted = 0, req_spec = 0;
  // Per worker: busy seconds of its calls (the device's share of a measured call, the whole
  // call otherwise) and whether its device measured any (StepReport::device_busy_seconds).
  std::vector<double> busy_seconds;
  std::vector<bool> busy_measured;
  double rollout_end = -1;
  bool stop_sent = false;
};

RolloutPhase::RolloutPhase(const RLRunPlan& plan, const RunCallbacks& cb,
                           const std::atomic<bool>* stop, WorkerPool& pool, const Task& task,
                           const Codec& codec, int64_t max_seq, reward::Scorer* scorer)
    : plan_(plan),
      cb_(cb),
      stop_(stop),
      pool_(pool),
      task_(task),
      codec_(codec),
      max_seq_(max_seq),
      scorer_(serial_scoring() ? nullptr : scorer) {}

RolloutPhase::~RolloutPhase() = default;

StatusOr<Rollouts> RolloutPhase::run(int64_t step, int64_t drafter_version, StepReport* r) {
  StepRun s;
  s.step = step, s.report = r;
  TLT_RETURN_IF_ERROR(plan_step(s, drafter_version));
  if (scorer_)
    scorer_->begin(size_t(int64_t(plan_.algorithm.prompts_per_step) * plan_.algorithm.group_size));
  TLT_RETURN_IF_ERROR(start_rollout(s));
  TLT_RETURN_IF_ERROR(run_rollout(s));
  TLT_RETURN_IF_ERROR(finish_rollout(s));
  Rollouts out;
  out.problems = std::move(s.problems), out.prompts = std::move(s.prompts);
  out.responses = std::move(s.responses), out.drafter_parts = std::move(s.drafter_parts);
  out.t0 = s.t0;
  return out;
}

// Workers dedicated to the drafter this step (true) and those that generate. The last
// plan_.drafter_role_workers are drafter slots: always dedicated. Among the rollout workers,
// those the rebalancer assigned, keeping at least one generating (highest index dropped first).
// Present dedicated workers are listed in r->drafter_workers.
std::vector<bool> RolloutPhase::dedicated_workers(int64_t step, StepReport* r) {
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
    if (dedicated[size_t(w)] && pool_.present(w)) r->drafter_workers.push_back(int(w));
  return dedicated;
}

Status RolloutPhase::plan_step(StepRun& s, int64_t drafter_version) {
  int64_t step = s.step;
  StepReport* r = s.report;
  const api::AlgorithmSpec& a = plan_.algorithm;
  int64_t p_count = a.prompts_per_step, g = a.group_size, n = plan_.workers;
  // This step's problems: a window of the training stream, so a resumed run sees the same.
  for (int64_t i = 0; i < p_count; ++i) {
    StatusOr<FittedProblem> f =
        fitting_problem(task_, codec_, kRlProblemOffset + uint64_t((step - 1) * p_count + i), false,
                        max_seq_ - a.max_response_tokens - kDraftHeadroom);
    if (!f.ok()) return f.status().with_context("step " + std::to_string(step));
    s.problems.push_back(std::move(f->problem));
    s.prompts.push_back(std::move(f->prompt));
  }
  const bool speculate = plan_.speculates();
  s.train_drafter = plan_.trains_drafter(step);
  std::vector<bool> dedicated = dedicated_workers(step, r);
  std::vector<int64_t> generators;
  for (int64_t w = 0; w < n; ++w)
    if (!dedicated[size_t(w)]) generators.push_back(w);
  // Prompts go round-robin over the generating workers, each with its whole group.
  s.gen_msgs.resize(size_t(n));
  s.replies.assign(size_t(n), StepReplyContext{});
  s.restarts.assign(size_t(n), 0);
  for (int64_t w = 0; w < n; ++w) {
    StepReplyContext& c = s.replies[size_t(w)];
    c.step = step, c.worker = int(w), c.vocab = codec_.vocab_size();
    c.max_tokens = a.max_response_tokens, c.run_dir = plan_.run_dir;
    c.answered.assign(size_t(p_count * g), false);
    GenerateMessage& m = s.gen_msgs[size_t(w)];
    m.step = step;
    m.policy = policy_path(plan_.run_dir, step - 1), m.policy_version = step - 1;
    m.speculative = speculate, m.collect_hidden = s.train_drafter;
    m.stream_completions = scorer_ != nullptr;
    int64_t slot = std::find(generators.begin(), generators.end(), w) - generators.begin();
    int64_t n_gen = int64_t(generators.size());
    for (int64_t pi = slot; slot < n_gen && pi < p_count; pi += n_gen) {
      for (int64_t k = 0; k < g; ++k) {
        GenerateRequest q;
        q.id = pi * g + k;
        c.assigned.push_back(q.id);  // ascending: pi and k rise
        q.prompt = s.prompts[pi], q.max_new = a.max_response_tokens;
        q.stop = codec_.end_ids().front();
        q.more_stop.assign(codec_.end_ids().begin() + 1, codec_.end_ids().end());
        q.seed = mix_seeds(mix_seeds(plan_.seed(), uint64_t(step)), uint64_t(q.id));
        q.temperature = a.temperature, q.top_p = a.top_p;
        m.requests.push_back(std::move(q));
      }
    }
    if (speculate) m.drafter = drafter_path(plan_.run_dir, drafter_version);
    m.drafter_version = speculate ? drafter_version : -1;
    // What the other workers' bandits measured in the last step (each step is passed on once).
    m.pool_bandit = speculate && plan_.speculative.selector.pooled;
    for (size_t v = 0; m.pool_bandit && v < bandit_steps_.size(); ++v)
      if (v != size_t(w))
        m.bandit_peers.insert(m.bandit_peers.end(), bandit_steps_[v].begin(),
                              bandit_steps_[v].end());
  }
  bandit_steps_.assign(size_t(n), {});
  return Status::Ok();
}

Status RolloutPhase::start_rollout(StepRun& s) {
  int64_t n = plan_.workers;
  StepReport* r = s.report;
  s.coord = std::make_unique<cluster::Coordinator>(
      int(n),
      s.train_drafter ? plan_.drafter.training.min_idle_workers : std::numeric_limits<int>::max());
  // Without drafter training (--baseline, frozen drafter) a dedicated worker just sits idle.
  TLT_RETURN_IF_ERROR(
      s.coord->set_dedicated(s.train_drafter ? r->drafter_workers : std::vector<int>{}));
  std::vector<int> absent;
  for (int64_t w = 0; w < n; ++w)
    if (!pool_.present(w)) absent.push_back(int(w));
  TLT_RETURN_IF_ERROR(s.coord->set_absent(absent));
  s.t0 = now_s();
  TLT_RETURN_IF_ERROR(s.coord->begin_step(s.step, 0.0));
  s.since.assign(size_t(n), 0.0);
  s.busy_seconds.assign(size_t(n), 0.0);
  s.busy_measured.assign(size_t(n), false);
  s.state.assign(size_t(n), "generating");
  for (int64_t w = 0; w < n; ++w) TLT_RETURN_IF_ERROR(pool_.send(w, to_json(s.gen_msgs[w])));
  s.responses.resize(
      size_t(int64_t(plan_.algorithm.prompts_per_step) * plan_.algorithm.group_size));
  s.submitted.assign(s.responses.size(), false);
  s.done.assign(size_t(n), false);
  s.awaiting_trained.assign(size_t(n), false);
  s.no_requests.assign(size_t(n), false);
  for (int64_t w = 0; w < n; ++w) {
    if (!pool_.present(w) || !s.gen_msgs[size_t(w)].requests.empty()) continue;
    s.no_requests[size_t(w)] = s.done[size_t(w)] = true;
    mark(s, int(w), "released", 0.0);
    StatusOr<std::vector<int>> train = s.coord->worker_done(int(w), 0.0);
    if (!train.ok()) return train.status();
    if (!s.coord->rollout_finished()) TLT_RETURN_IF_ERROR(start_training(s, *train, 0.0));
  }
  return Status::Ok();
}

void RolloutPhase::mark(StepRun& s, int w, const std::string& state, double t) {
  if (t > s.since[w]) s.report->timeline.push_back({w, s.state[w], s.since[w], t});
  s.state[w] = state, s.since[w] = t;
  if (cb_.worker_state) cb_.worker_state(w, state);
}

// Buffers available to drafter trainers: previous steps' and this step's finished workers.
std::vector<std::string> RolloutPhase::buffers(const StepRun& s) const {
  std::vector<std::string> files;
  const int64_t first = std::max<int64_t>(1, s.step - plan_.drafter.training.buffer_steps + 1);
  for (int64_t st = first; st <= s.step; ++st)
    for (int64_t w = 0; w < plan_.workers; ++w) {
      std::string f = buffer_path(plan_.run_dir, st, w);
      if (fs::exists(f)) files.push_back(f);
    }
  return files;
}

Status RolloutPhase::start_training(StepRun& s, const std::vector<int>& ws, double t) {
  for (int w : ws) {
    mark(s, w, "training", t);
    s.awaiting_trained[w] = true;
    TLT_RETURN_IF_ERROR(pool_.send(w, to_json(TrainMessage{s.step, buffers(s)})));
  }
  return Status::Ok();
}

Status RolloutPhase::run_rollout(StepRun& s) {
  const char* fault = std::getenv("TLT_FAULT_KILL_WORKER");
  int64_t kill_step = fault ? std::atoll(fault) : -1;
  auto any = [](const std::vector<bool>& v) {
    return std::find(v.begin(), v.end(), true) != v.end();
  };
  for (;;) {
    if (stopping()) return Status::Aborted("stopped by signal");
    double t = now_s() - s.t0;
    if (s.step == kill_step && !killed_once_ && !s.done[0] && pool_.pid(0) > 0) {  // mid-step
      killed_once_ = true;
      log("fault injection: killing rollout worker 0 (pid " + std::to_string(pool_.pid(0)) +
          ") mid-step");
      kill(pool_.pid(0), SIGKILL);
    }
    StatusOr<std::vector<int>> ready = pool_.wait_readable(20);
    if (!ready.ok()) return ready.status();
    t = now_s() - s.t0;
    for (int w : *ready) TLT_RETURN_IF_ERROR(handle_worker(s, w, t));
    if (!s.stop_sent && s.coord->rollout_finished()) {
      s.rollout_end = t;
      s.stop_sent = true;
      for (int64_t w = 0; w < plan_.workers; ++w)
        if (s.awaiting_trained[w])
          TLT_RETURN_IF_ERROR(pool_.send(w, to_json(StopMessage{now_s()})));
    }
    // The step ends once every trainer stopped and every worker without requests confirmed the
    // step's weights (its reply must not spill into the next step).
    if (s.stop_sent && !any(s.awaiting_trained) && !any(s.no_requests)) return Status::Ok();
  }
}

Status RolloutPhase::handle_worker(StepRun& s, int w, double t) {
  Status st = pool_.channel(w).pump();
  if (!st.ok() && !pool_.channel(w).has_buffered()) return worker_died(s, w, st, t);
  while (std::optional<json> m = pool_.channel(w).pop()) {
    Status handled = handle_message(s, w, *m, t);
    if (handled.code() == StatusCode::kInvalidArgument) return refuse_worker(s, w, handled, t);
    TLT_RETURN_IF_ERROR(handled);
  }
  return Status::Ok();
}

Status RolloutPhase::handle_message(StepRun& s, int w, const json& m, double t) {
  const StepReplyContext& c = s.replies[size_t(w)];
  const json* op = m.is_object() && m.contains("op") ? &m.at("op") : nullptr;
  const std::string name = op && op->is_string() ? op->get<std::string>() : "";
  const std::string from = "worker " + std::to_string(w) + "'s " + name;
  const bool answered_step = s.done[size_t(w)] && !s.no_requests[size_t(w)];
  if (name == "completed") {
    if (answered_step)
      return Status::InvalidArgument(from + ": it already answered step " + std::to_string(s.step));
    StatusOr<Completed> r = decode_completed(m, c);
    return r.ok() ? applied(on_completed(s, w, std::move(r->response))) : r.status();
  }
  if (name == "generated") {
    if (answered_step)
      return Status::InvalidArgument(from + ": it already answered step " + std::to_string(s.step));
    StatusOr<Generated> g = decode_generated(m, c);
    return g.ok() ? applied(on_generated(s, w, std::move(*g), t)) : g.status();
  }
  if (name == "trained") {
    if (!s.awaiting_trained[size_t(w)])
      return Status::InvalidArgument(from + ": it was not training");
    StatusOr<Trained> tr = decode_trained(m, c);
    if (!tr.ok()) return tr.status();
    on_trained(s, w, *tr, t);
    return Status::Ok();
  }
  return Status::InvalidArgument("worker " + std::to_string(w) + " sent a message of op " +
                                 (op ? op->dump().substr(0, 40) : std::string("(none)")) +
                                 " during step " + std::to_string(s.step) +
                                 "; expected completed, generated or trained");
}

Status RolloutPhase::refuse_worker(StepRun& s, int w, const Status& why, double t) {
  log("refused " + why.message() + "; the worker is treated as failed");
  if (pool_.pid(w) > 0) kill(pool_.pid(w), SIGKILL);  // restart() reaps it
  return worker_died(s, w, why, t);
}

Status RolloutPhase::worker_died(StepRun& s, int w, const Status& why, double t) {
  if (pool_.optional(w)) {
    // A drafter pod went away (deleted by a scale-down, or failed): the step goes on without
    // it; the training it had not handed back is lost.
    pool_.drop(w, why.message());
    TLT_RETURN_IF_ERROR(s.coord->worker_left(w, t));
    s.awaiting_trained[size_t(w)] = false;
    s.no_requests[size_t(w)] = false;
    mark(s, w, "idle", t);
    return Status::Ok();
  }
  // The worker died: restart it (remote: wait for it to connect again) and rerun what it had
  // not finished.
  if (++s.restarts[size_t(w)] > kMaxRestartsPerStep)
    return Status::Unavailable("rollout worker " + std::to_string(w) + " failed " +
                               std::to_string(s.restarts[size_t(w)]) + " times in step " +
                               std::to_string(s.step) + " (last: " + why.message() + ")");
  ++s.report->restarts;
  StepReplyContext& c = s.replies[size_t(w)];
  std::fill(c.answered.begin(), c.answered.end(), false);  // it starts its requests again
  log("rollout worker " + std::to_string(w) + " died (" + why.message() + "); restarting");
  TLT_RETURN_IF_ERROR(pool_.restart(w));
  bool was_generating = s.coord->state(w) == cluster::WorkerState::kGenerating;
  StatusOr<std::vector<int>> again = s.coord->worker_restarted(w, t);
  if (!again.ok()) return again.status();
  if (was_generating) return pool_.send(w, to_json(s.gen_msgs[w]));
  // A worker without requests that had not confirmed the weights yet: ask again.
  if (s.no_requests[size_t(w)]) TLT_RETURN_IF_ERROR(pool_.send(w, to_json(s.gen_msgs[w])));
  if (s.awaiting_trained[w]) mark(s, w, "released", t);
  s.awaiting_trained[w] = false;
  if (!s.stop_sent) TLT_RETURN_IF_ERROR(start_training(s, *again, t));
  return Status::Ok();
}

Status RolloutPhase::on_completed(StepRun& s, int w, Response c) {
  s.replies[size_t(w)].answered[size_t(c.id)] = true;
  const size_t id = size_t(c.id);
  if (s.submitted[id]) return Status::Ok();  // an earlier run of the worker's was kept
  s.responses[id] = std::move(c.tokens);
  return submit_for_reward(s, id);
}

Status RolloutPhase::submit_for_reward(StepRun& s, size_t id) {
  if (!scorer_ || id >= s.responses.size() || s.submitted[id]) return Status::Ok();
  s.submitted[id] = true;
  StatusOr<std::string> text = codec_.decode(s.responses[id]);
  if (!text.ok()) return text.status().with_context("step " + std::to_string(s.step));
  const Problem& p = s.problems[id / size_t(plan_.algorithm.group_size)];
  scorer_->submit(id, score_request(p, step_request_id(s.step, int64_t(id)), std::move(*text)));
  return Status::Ok();
}

Status RolloutPhase::on_generated(StepRun& s, int w, Generated g, double t) {
  if (s.no_requests[size_t(w)]) {  // released at the start of the step: only the reply
    s.no_requests[size_t(w)] = false;
    return Status::Ok();
  }
  StepReport* r = s.report;
  for (Response& c : g.responses) {
    const size_t id = size_t(c.id);
    if (s.submitted[id]) continue;  // streamed: kept as scored
    s.responses[id] = std::move(c.tokens);
    TLT_RETURN_IF_ERROR(submit_for_reward(s, id));
  }
  const GeneratedStats& st = g.stats;
  r->tokens += st.tokens;
  s.accepted += st.accepted;
  s.req_spec += st.request_spec_steps;
  for (const auto& [arm, c] : st.arms) r->arms[arm] += c;
  for (const auto& [phase, sec] : st.phases) r->phase_seconds[phase] += sec;
  r->copied_drafts += st.copied;
  r->bandit_absorbed += st.bandit_absorbed;
  if (st.has_bandit && size_t(w) < bandit_steps_.size()) bandit_steps_[size_t(w)] = st.bandit;
  r->draft_vocabulary = std::max(r->draft_vocabulary, st.draft_vocab);
  add_busy(s, w, g.device_busy, g.seconds);
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

void RolloutPhase::add_busy(StepRun& s, int w, double device_share, double seconds) {
  if (size_t(w) >= s.busy_seconds.size()) return;
  s.busy_seconds[size_t(w)] += device_share >= 0 ? device_share * seconds : seconds;
  if (device_share >= 0) s.busy_measured[size_t(w)] = true;
}

void RolloutPhase::on_trained(StepRun& s, int w, const Trained& tr, double t) {
  StepReport* r = s.report;
  s.awaiting_trained[w] = false;
  add_busy(s, w, tr.device_busy, tr.seconds);
  mark(s, w, "released", t);
  r->drafter_steps += tr.steps;
  if (tr.steps > 0) {
    s.drafter_parts.push_back({tr.drafter, tr.steps});
    r->drafter_loss = tr.loss_last;
  }
  r->stop_latency_ms = std::max(r->stop_latency_ms, 1000.0 * tr.stop_latency_s);
}

Status RolloutPhase::finish_rollout(StepRun& s) {
  StepReport* r = s.report;
  int64_t n = plan_.workers;
  StatusOr<std::vector<int>> preempted = s.coord->end_step(s.rollout_end);
  if (!preempted.ok()) return preempted.status();
  r->idle_worker_seconds = s.coord->idle_seconds();
  r->reclaimed_worker_seconds = s.coord->reclaimed_seconds();
  for (int64_t w = 0; w < n; ++w)
    if (pool_.present(w)) mark(s, int(w), "idle", now_s() - s.t0);
  r->rollout_seconds = s.rollout_end;
  if (std::find(s.busy_measured.begin(), s.busy_measured.end(), true) != s.busy_measured.end()) {
    r->device_busy_seconds.assign(size_t(n), -1.0);
    for (int64_t w = 0; w < n; ++w)
      if (s.busy_measured[size_t(w)]) r->device_busy_seconds[size_t(w)] = s.busy_seconds[size_t(w)];
  }
  r->accept_length = s.req_spec ? double(s.accepted + s.req_spec) / double(s.req_spec) : 0.0;
  // Old buffers rotate out.
  std::error_code ec;
  for (int64_t w = 0; w < n; ++w)
    fs::remove(buffer_path(plan_.run_dir, s.step - plan_.drafter.training.buffer_steps, w), ec);
  return Status::Ok();
}

}  // namespace tlt::rl
