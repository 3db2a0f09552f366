#include "runtime/rl/run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

#include "api/fnv.h"
#include "runtime/cluster/coordinator.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/config.h"
#include "runtime/model/drafter.h"
#include "runtime/rl/channel.h"
#include "runtime/rl/evaluation.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/rendezvous.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"
#include "runtime/rl/warm_start.h"
#include "runtime/torch_env.h"

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
          {"stepSeconds", r.step_seconds},
          {"generatingWorkerSeconds", r.generating_worker_seconds},
          {"idleWorkerSeconds", r.idle_worker_seconds},
          {"reclaimedWorkerSeconds", r.reclaimed_worker_seconds},
          {"acceptLength", r.accept_length},
          {"arms", r.arms},
          {"copiedDrafts", r.copied_drafts},
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
  r.generating_worker_seconds = j.at("generatingWorkerSeconds");
  r.idle_worker_seconds = j.at("idleWorkerSeconds");
  r.reclaimed_worker_seconds = j.at("reclaimedWorkerSeconds");
  r.accept_length = j.at("acceptLength");
  r.arms = j.at("arms").get<std::map<std::string, int64_t>>();
  r.copied_drafts = j.value("copiedDrafts", int64_t(0));  // absent from older reports
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

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
  return x;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = size_t(std::ceil(q * double(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

// A worker process and its channel.
struct Proc {
  pid_t pid = -1;
  int to = -1, from = -1;
  std::unique_ptr<Channel> ch;
};

class Driver {
 public:
  Driver(const RLRunPlan& plan, const RunCallbacks& cb, const std::atomic<bool>* stop)
      : plan_(plan), cb_(cb), stop_(stop) {}
  ~Driver() { shutdown(); }
  StatusOr<RLRunResult> run();

 private:
  Status init_models();
  Status spawn(int w);
  Status connect_remote(int w);
  // Remote workers: one connection that says hello into pending_, waiting up to timeout_ms;
  // DeadlineExceeded when none came.
  Status accept_one(int timeout_ms);
  Status attach(int w, int fd);  // pairs worker w with a connection and sends its setup
  // Drafter pods (remote): await those the spec has at the start; at a step boundary take the
  // ones that connected and drop the ones that hung up; drop one that left.
  Status await_drafter_pods();
  void admit_drafter_pods(int64_t step);
  void drop(int w, const std::string& why);
  // A drafter pod's slot: it may be absent (remote workers only).
  bool optional_worker(int64_t w) const { return plan_.listen_port > 0 && w >= rollout_workers(); }
  bool present(int64_t w) const { return procs_[size_t(w)].ch != nullptr; }
  // Sends to worker w. A drafter pod that is absent or gone, or a rollout worker whose peer is
  // gone, is not an error: a dead connection shows up in the step's poll, which drops the drafter
  // pod or restarts the rollout worker.
  Status send_to(int64_t w, const json& m);
  json setup_message(int w) const;
  int64_t rollout_workers() const {
    return std::max<int64_t>(1, plan_.workers - plan_.drafter_role_workers);
  }
  void shutdown();
  bool stopping() const { return stop_ && stop_->load(); }
  Status run_step(int64_t step, StepReport* report);
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
  model::Transformer policy_{nullptr}, reference_{nullptr};
  model::Drafter drafter_{nullptr};
  std::unique_ptr<PolicyTrainer> trainer_;
  std::vector<Proc> procs_;
  RLRunResult result_;
  int64_t start_step_ = 0;  // steps already done (resume)
  int64_t drafter_version_ = 0;
  int64_t last_saved_ = -1;
  bool killed_once_ = false;
  int listen_fd_ = -1;          // remote workers: the rendezvous socket
  std::map<int, int> pending_;  // remote workers connected, not yet paired: index -> socket
  std::vector<int> last_drafter_workers_;  // as last logged
};

Status Driver::init_models() {
  StatusOr<std::unique_ptr<Task>> task = make_task(plan_.task, plan_.task_seed);
  if (!task.ok()) return task.status();
  task_ = std::move(*task);
  StatusOr<model::ModelConfig> cfg = model::preset_config(plan_.preset, kTextVocab);
  if (!cfg.ok()) return cfg.status();
  cfg_ = *cfg;
  torch::manual_seed(plan_.seed);
  policy_ = model::Transformer(cfg_);
  reference_ = model::Transformer(cfg_);
  WarmStartOptions wo;
  wo.steps = plan_.warm_start_steps;
  wo.learning_rate = plan_.warm_start_learning_rate;
  wo.max_prompt_chars = plan_.warm_start_max_prompt_chars;
  wo.seed = plan_.seed;
  wo.max_response_tokens = plan_.max_response_tokens;
  std::ostringstream key;
  key << plan_.preset << "-" << plan_.task << "-" << plan_.task_seed << "-" << wo.steps << "-"
      << wo.learning_rate << "-" << wo.batch << "-" << wo.max_response_tokens << "-"
      << wo.max_prompt_chars << "-" << wo.seed;
  result_.warm_start = plan_.cache_dir + "/rl/warm-start-" +
                       std::to_string(fnv1a64(key.str()) % 1000000007ull) + ".ckpt";
  log("warm start: " + result_.warm_start);
  TLT_RETURN_IF_ERROR(load_or_train_warm_start(policy_, *task_, wo, result_.warm_start,
                                               &result_.warm_start_trained, cb_.warm_start));
  TLT_RETURN_IF_ERROR(model::load_checkpoint(*reference_, result_.warm_start).status());
  for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  reference_->eval();
  policy_->eval();
  torch::manual_seed(mix(plan_.seed, 7));
  drafter_ = model::Drafter(policy_, plan_.drafter_layers);
  if (!plan_.baseline && plan_.drafter_warm_start_steps > 0) {
    WarmStartOptions dw = wo;
    dw.steps = plan_.drafter_warm_start_steps;
    dw.learning_rate = plan_.drafter_warm_start_learning_rate;
    dw.batch = plan_.drafter_warm_start_batch;
    dw.max_response_tokens =
        std::min<int64_t>(plan_.max_response_tokens, plan_.drafter_warm_start_max_tokens);
    std::ostringstream dkey;
    dkey << plan_.drafter_layers << "-" << dw.steps << "-" << dw.learning_rate << "-" << dw.batch
         << "-" << dw.max_response_tokens << "-" << dw.seed;
    std::string path =
        result_.warm_start + ".drafter-" + std::to_string(fnv1a64(dkey.str()) % 1000000007ull);
    log("drafter warm start: " + path);
    bool trained = false;
    TLT_RETURN_IF_ERROR(load_or_train_drafter_warm_start(policy_, drafter_, *task_, dw, path,
                                                         &trained, cb_.drafter_warm_start));
  }
  // The RNG state after initialisation must not depend on whether the drafter warm start ran
  // (the baseline skips it), so the two modes take the same random draws from here on.
  torch::manual_seed(mix(plan_.seed, 11));
  GrpoOptions go;
  go.learning_rate = plan_.learning_rate, go.clip = plan_.clip, go.kl_coef = plan_.kl_coef;
  go.temperature = plan_.temperature;
  go.aggregation = plan_.loss_aggregation == "sequence" ? LossAggregation::kSequenceMean
                                                        : LossAggregation::kTokenMean;
  trainer_ = std::make_unique<PolicyTrainer>(policy_, reference_, go);
  return Status::Ok();
}

Status Driver::connect_remote(int w) {
  if (listen_fd_ < 0) {
    StatusOr<int> fd = listen_tcp(plan_.listen_port, plan_.listen_loopback);
    if (!fd.ok()) return fd.status();
    listen_fd_ = *fd;
    log("waiting for " + std::to_string(rollout_workers()) + " rollout workers on port " +
        std::to_string(plan_.listen_port));
  }
  while (!pending_.count(w)) {
    Status st = accept_one(plan_.connect_timeout_s * 1000);
    if (!st.ok())
      return Status(st.code(), "rollout worker " + std::to_string(w) + ": " + st.message());
  }
  int fd = pending_[w];
  pending_.erase(w);
  log("rollout worker " + std::to_string(w) + " connected");
  return attach(w, fd);
}

Status Driver::accept_one(int timeout_ms) {
  StatusOr<std::pair<int, int>> c = accept_worker(listen_fd_, timeout_ms);
  if (!c.ok()) return c.status();
  auto [fd, index] = *c;
  if (index < 0) {
    log("a worker said it is worker " + std::to_string(index) + ": refused");
    close(fd);
    return Status::Ok();
  }
  if (index >= plan_.workers) {
    // A drafter pod beyond the slots this trainer started with (maxReplicas raised since): it
    // stays connected and unused rather than failing its pod.
    log("worker " + std::to_string(index) + " connected, but this job has " +
        std::to_string(plan_.workers) + " worker slots (spec.roles.drafter.maxReplicas when the " +
        "trainer started): it waits unused");
  }
  if (pending_.count(index)) close(pending_[index]);  // a newer connection wins
  pending_[index] = fd;
  return Status::Ok();
}

Status Driver::attach(int w, int fd) {
  Proc& p = procs_[size_t(w)];
  p.pid = -1, p.to = fd, p.from = fd;
  p.ch = std::make_unique<Channel>(fd, fd);
  p.ch->mirror_files(plan_.run_dir);
  return p.ch->send(setup_message(w));
}

void Driver::drop(int w, const std::string& why) {
  Proc& p = procs_[size_t(w)];
  if (p.to >= 0) close(p.to);
  p.pid = -1, p.to = p.from = -1;
  p.ch.reset();
  log("drafter pod " + std::to_string(w - rollout_workers()) + " (worker " + std::to_string(w) +
      ") left (" + why + "); the job goes on without it");
}

Status Driver::await_drafter_pods() {
  if (plan_.listen_port <= 0 || plan_.drafter_role_workers <= 0) return Status::Ok();
  int64_t expected = plan_.drafter_pods_at_start < 0
                         ? plan_.drafter_role_workers
                         : std::min(plan_.drafter_pods_at_start, plan_.drafter_role_workers);
  auto missing = [&] {
    for (int64_t w = rollout_workers(); w < rollout_workers() + expected; ++w)
      if (!pending_.count(int(w))) return true;
    return false;
  };
  double deadline = now_s() + plan_.drafter_start_grace_s;
  while (missing() && now_s() < deadline) {
    Status st = accept_one(int(std::max(1.0, 1000 * (deadline - now_s()))));
    if (st.code() == StatusCode::kDeadlineExceeded) break;
    if (!st.ok()) return st;
  }
  if (missing())
    log("not every drafter pod connected within " + std::to_string(plan_.drafter_start_grace_s) +
        " s; the job starts without the missing ones, which join at a step boundary");
  admit_drafter_pods(start_step_ + 1);
  return Status::Ok();
}

void Driver::admit_drafter_pods(int64_t step) {
  if (plan_.listen_port <= 0 || listen_fd_ < 0) return;
  while (accept_one(0).ok()) {
  }
  for (int64_t w = rollout_workers(); w < plan_.workers; ++w) {
    if (present(w)) {  // still there? (a pod that went away between steps)
      pollfd p{procs_[size_t(w)].from, POLLIN, 0};
      bool hung_up = poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) &&
                     !procs_[size_t(w)].ch->pump().ok() && !procs_[size_t(w)].ch->has_buffered();
      if (hung_up) {
        drop(int(w), "hung up between steps");
      } else if (pending_.count(int(w))) {
        drop(int(w), "connected again");  // its pod restarted: the new connection wins
      }
    }
    if (present(w) || !pending_.count(int(w))) continue;
    int fd = pending_[int(w)];
    pending_.erase(int(w));
    log("drafter pod " + std::to_string(w - rollout_workers()) + " (worker " + std::to_string(w) +
        ") joined at step " + std::to_string(step));
    Status st = attach(int(w), fd);
    if (!st.ok()) drop(int(w), st.message());
  }
}

Status Driver::send_to(int64_t w, const json& m) {
  if (optional_worker(w) && !present(w)) return Status::Ok();
  Status st = procs_[size_t(w)].ch->send(m);
  if (st.ok() || optional_worker(w)) return Status::Ok();
  // A rollout worker that died between its last message and this one (a pod deleted at a step
  // boundary): its connection's end shows up in the step's poll, which restarts it and sends
  // its requests again. Any other failure (a file that cannot be mirrored) is the job's.
  if (st.code() == StatusCode::kUnavailable) {
    log("rollout worker " + std::to_string(w) + ": " + st.message() + "; restarting it");
    return Status::Ok();
  }
  return st;
}

Status Driver::spawn(int w) {
  if (plan_.listen_port > 0) return connect_remote(w);
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0)
    return Status::Unavailable("cannot create pipes for a rollout worker");
  // A worker plays one GPU with one core: one compute thread, also for BLIS and OpenMP, whose
  // pools would otherwise oversubscribe the pinned core (the parent's values are inherited).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("BLIS_NUM_THREADS=", 0) != 0 && kv.rfind("OMP_NUM_THREADS=", 0) != 0)
      env_strings.push_back(kv);
  }
  env_strings.push_back("BLIS_NUM_THREADS=1");
  env_strings.push_back("OMP_NUM_THREADS=1");
  std::vector<char*> envp;
  for (std::string& kv : env_strings) envp.push_back(kv.data());
  envp.push_back(nullptr);
  char arg0[] = "tlt", arg1[] = "rl-worker";
  char* argv[] = {arg0, arg1, nullptr};
  pid_t pid = fork();
  if (pid < 0) return Status::Unavailable("cannot fork a rollout worker");
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    execve(plan_.worker_exe.c_str(), argv, envp.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  Proc& p = procs_[w];
  p.pid = pid, p.to = to_child[1], p.from = from_child[0];
  p.ch = std::make_unique<Channel>(p.from, p.to);
  return p.ch->send(setup_message(w));
}

json Driver::setup_message(int w) const {
  std::vector<int> cpus = runtime::allowed_cpus();
  return {{"op", "setup"},
          {"index", w},
          {"dir", plan_.run_dir},
          {"core", cpus[size_t(w) % cpus.size()]},
          {"preset", plan_.preset},
          {"vocab", kTextVocab},
          {"drafter_layers", plan_.drafter_layers},
          {"drafter_vocab", plan_.drafter_vocab_subset},
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
          {"seed", mix(plan_.seed, 11)},
          {"drafter_lr", plan_.drafter_learning_rate},
          {"drafter_batch", plan_.drafter_batch}};
}

void Driver::shutdown() {
  for (auto& [index, fd] : pending_) close(fd);
  pending_.clear();
  if (listen_fd_ >= 0) close(listen_fd_), listen_fd_ = -1;
  for (Proc& p : procs_) {
    if (p.pid <= 0 && p.to >= 0) {  // remote: say goodbye and hang up
      if (p.ch) (void)p.ch->send({{"op", "exit"}});
      close(p.to);
      p.to = p.from = -1;
    }
    if (p.pid <= 0) continue;
    if (p.ch) (void)p.ch->send({{"op", "exit"}});
    close(p.to);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      gone = waitpid(p.pid, nullptr, WNOHANG) == p.pid;
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!gone) kill(p.pid, SIGKILL), waitpid(p.pid, nullptr, 0);
    close(p.from);
    p.pid = -1;
  }
}

Status Driver::merge_drafters(const std::vector<std::pair<std::string, int64_t>>& parts) {
  torch::NoGradGuard no_grad;
  int64_t total = 0;
  for (const auto& [path, steps] : parts) total += steps;
  if (total == 0) return Status::Ok();
  std::vector<torch::Tensor> sum;
  for (auto& p : drafter_->parameters()) sum.push_back(torch::zeros_like(p));
  for (const auto& [path, steps] : parts) {
    model::Drafter d(policy_, plan_.drafter_layers);
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
  admit_drafter_pods(step);  // drafter pods that connected since the last step
  int64_t p_count = plan_.prompts_per_step, g = plan_.group_size, n = plan_.workers;
  // This step's problems: a window of the training stream, so a resumed run sees the same.
  std::vector<Problem> problems;
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < p_count; ++i) {
    problems.push_back(
        task_->problem(kRlProblemOffset + uint64_t((step - 1) * p_count + i), false));
    prompts.push_back(encode_text(problems.back().prompt));
  }
  bool speculate = !plan_.baseline && plan_.speculative;
  bool train_drafter = !plan_.baseline && plan_.drafter_training &&
                       (plan_.freeze_drafter_after < 0 || step <= plan_.freeze_drafter_after);
  // Workers dedicated to the drafter this step, and those that generate. The last
  // plan_.drafter_role_workers are drafter pods: always dedicated. Among the rollout workers,
  // those the rebalancer assigned, keeping at least one generating (highest index dropped first).
  int64_t rollout_n = n - plan_.drafter_role_workers;
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
  std::vector<int64_t> generators;
  for (int64_t w = 0; w < n; ++w) {
    if (dedicated[size_t(w)]) {
      if (present(w)) r->drafter_workers.push_back(int(w));
    } else {
      generators.push_back(w);
    }
  }
  std::vector<json> gen_msgs(static_cast<size_t>(n));
  for (int64_t w = 0; w < n; ++w) {
    json reqs = json::array();
    int64_t slot = std::find(generators.begin(), generators.end(), w) - generators.begin();
    int64_t n_gen = int64_t(generators.size());
    for (int64_t pi = slot; slot < n_gen && pi < p_count; pi += n_gen) {
      for (int64_t k = 0; k < g; ++k) {
        int64_t id = pi * g + k;
        reqs.push_back({{"id", id},
                        {"prompt", prompts[pi]},
                        {"max_new", plan_.max_response_tokens},
                        {"stop", kEndOfText},
                        {"seed", mix(mix(plan_.seed, uint64_t(step)), uint64_t(id))},
                        {"temperature", plan_.temperature},
                        {"top_p", plan_.top_p}});
      }
    }
    json m = {{"op", "generate"},
              {"step", step},
              {"policy", policy_path(step - 1)},
              {"policy_version", step - 1},
              {"speculative", speculate},
              {"collect_hidden", train_drafter},
              {"requests", reqs}};
    if (speculate)
      m["drafter"] = drafter_path(drafter_version_), m["drafter_version"] = drafter_version_;
    gen_msgs[size_t(w)] = std::move(m);
  }
  cluster::Coordinator coord(
      int(n), train_drafter ? plan_.min_idle_workers : std::numeric_limits<int>::max());
  // Without drafter training (--baseline, frozen drafter) a dedicated worker just sits idle.
  TLT_RETURN_IF_ERROR(coord.set_dedicated(train_drafter ? r->drafter_workers : std::vector<int>{}));
  std::vector<int> absent;
  for (int64_t w = 0; w < n; ++w)
    if (!present(w)) absent.push_back(int(w));
  TLT_RETURN_IF_ERROR(coord.set_absent(absent));
  double t0 = now_s();
  TLT_RETURN_IF_ERROR(coord.begin_step(step, 0.0));
  std::vector<double> since(size_t(n), 0.0);
  std::vector<std::string> state(size_t(n), "generating");
  auto mark = [&](int w, const std::string& s, double t) {
    if (t > since[w]) r->timeline.push_back({w, state[w], since[w], t});
    state[w] = s, since[w] = t;
    if (cb_.worker_state) cb_.worker_state(w, s);
  };
  for (int64_t w = 0; w < n; ++w) TLT_RETURN_IF_ERROR(send_to(w, gen_msgs[w]));

  std::vector<std::vector<int64_t>> responses(size_t(p_count * g));
  std::vector<bool> done(size_t(n), false), awaiting_trained(size_t(n), false);
  // A worker without requests (dedicated to the drafter, or more workers than prompts) is
  // released at once: loading the new weights is not generating. Its reply only confirms them.
  std::vector<bool> no_requests(size_t(n), false);
  std::vector<std::pair<std::string, int64_t>> drafter_parts;
  int64_t accepted = 0, req_spec = 0;
  double rollout_end = -1;
  bool stop_sent = false;
  // Buffers available to drafter trainers: previous steps' and this step's finished workers.
  auto buffers = [&]() {
    json files = json::array();
    for (int64_t s = std::max<int64_t>(1, step - plan_.buffer_steps + 1); s <= step; ++s)
      for (int64_t w = 0; w < n; ++w) {
        std::string f =
            plan_.run_dir + "/buffer/step-" + std::to_string(s) + "-w" + std::to_string(w) + ".pt";
        if (fs::exists(f)) files.push_back(f);
      }
    return files;
  };
  auto start_training = [&](const std::vector<int>& ws, double t) -> Status {
    for (int w : ws) {
      mark(w, "training", t);
      awaiting_trained[w] = true;
      TLT_RETURN_IF_ERROR(send_to(w, {{"op", "train"}, {"step", step}, {"buffers", buffers()}}));
    }
    return Status::Ok();
  };
  for (int64_t w = 0; w < n; ++w) {
    if (!present(w) || !gen_msgs[size_t(w)].at("requests").empty()) continue;
    no_requests[size_t(w)] = done[size_t(w)] = true;
    mark(int(w), "released", 0.0);
    StatusOr<std::vector<int>> train = coord.worker_done(int(w), 0.0);
    if (!train.ok()) return train.status();
    if (!coord.rollout_finished()) TLT_RETURN_IF_ERROR(start_training(*train, 0.0));
  }
  const char* fault = std::getenv("TLT_FAULT_KILL_WORKER");
  int64_t kill_step = fault ? std::atoll(fault) : -1;

  for (;;) {
    if (stopping()) return Status::Aborted("stopped by signal");
    double t = now_s() - t0;
    if (step == kill_step && !killed_once_ && !done[0] && procs_[0].pid > 0) {  // mid-step
      killed_once_ = true;
      log("fault injection: killing rollout worker 0 (pid " + std::to_string(procs_[0].pid) +
          ") mid-step");
      kill(procs_[0].pid, SIGKILL);
    }
    std::vector<pollfd> fds;
    for (int64_t w = 0; w < n; ++w) fds.push_back({procs_[w].from, POLLIN, 0});
    int pr = poll(fds.data(), fds.size(), 20);
    if (pr < 0 && errno != EINTR) return Status::Internal("poll failed");
    t = now_s() - t0;
    for (int64_t w = 0; w < n; ++w) {
      if (!(fds[w].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Status st = procs_[w].ch->pump();
      if (!st.ok() && !procs_[w].ch->has_buffered() && optional_worker(w)) {
        // A drafter pod went away (deleted by a scale-down, or failed): the step goes on
        // without it; the training it had not handed back is lost.
        drop(int(w), st.message());
        TLT_RETURN_IF_ERROR(coord.worker_left(int(w), t));
        awaiting_trained[size_t(w)] = false;
        no_requests[size_t(w)] = false;
        mark(int(w), "idle", t);
        continue;
      }
      if (!st.ok() && !procs_[w].ch->has_buffered()) {
        // The worker died: restart it (remote: wait for it to connect again) and rerun what
        // it had not finished.
        if (procs_[w].pid > 0) waitpid(procs_[w].pid, nullptr, 0);
        close(procs_[w].to);
        if (procs_[w].from != procs_[w].to) close(procs_[w].from);
        procs_[w].pid = -1;
        ++r->restarts;
        log("rollout worker " + std::to_string(w) + " died (" + st.message() + "); restarting");
        TLT_RETURN_IF_ERROR(spawn(int(w)));
        bool was_generating = coord.state(int(w)) == cluster::WorkerState::kGenerating;
        StatusOr<std::vector<int>> again = coord.worker_restarted(int(w), t);
        if (!again.ok()) return again.status();
        if (was_generating) {
          TLT_RETURN_IF_ERROR(send_to(w, gen_msgs[w]));
        } else {
          // A worker without requests that had not confirmed the weights yet: ask again.
          if (no_requests[size_t(w)]) TLT_RETURN_IF_ERROR(send_to(w, gen_msgs[w]));
          if (awaiting_trained[w]) mark(int(w), "released", t);
          awaiting_trained[w] = false;
          if (!stop_sent) TLT_RETURN_IF_ERROR(start_training(*again, t));
        }
        continue;
      }
      while (std::optional<json> m = procs_[w].ch->pop()) {
        std::string op = m->value("op", "");
        if (op == "generated") {
          if (m->at("policy_version").get<int64_t>() != step - 1)
            return Status::Internal("worker generated with policy version " +
                                    m->at("policy_version").dump());
          if (no_requests[size_t(w)]) {  // released at the start of the step: only the reply
            no_requests[size_t(w)] = false;
            continue;
          }
          for (const json& c : m->at("completions"))
            responses[c.at("id").get<size_t>()] = c.at("tokens").get<std::vector<int64_t>>();
          const json& s = m->at("stats");
          r->tokens += s.at("tokens").get<int64_t>();
          accepted += s.at("accepted").get<int64_t>();
          req_spec += s.at("request_spec_steps").get<int64_t>();
          for (auto& [arm, c] : s.at("arms").items()) r->arms[arm] += c.get<int64_t>();
          r->copied_drafts += s.value("copied", int64_t(0));
          r->draft_vocabulary = std::max(r->draft_vocabulary, s.value("draft_vocab", int64_t(0)));
          done[w] = true;
          r->generating_worker_seconds += t;
          mark(int(w), "released", t);
          StatusOr<std::vector<int>> train = coord.worker_done(int(w), t);
          if (!train.ok()) return train.status();
          // The last worker to finish ends the rollout phase: nobody starts training then.
          if (!stop_sent && !coord.rollout_finished())
            TLT_RETURN_IF_ERROR(start_training(*train, t));
        } else if (op == "trained") {
          awaiting_trained[w] = false;
          mark(int(w), "released", t);
          int64_t steps = m->at("steps").get<int64_t>();
          r->drafter_steps += steps;
          if (steps > 0) {
            drafter_parts.push_back({m->at("drafter").get<std::string>(), steps});
            r->drafter_loss = m->at("loss_last").get<double>();
          }
          r->stop_latency_ms =
              std::max(r->stop_latency_ms, 1000.0 * m->at("stop_latency_s").get<double>());
        } else {
          return Status::Internal("unexpected worker message " + m->dump().substr(0, 120));
        }
      }
    }
    if (!stop_sent && coord.rollout_finished()) {
      rollout_end = t;
      stop_sent = true;
      for (int64_t w = 0; w < n; ++w)
        if (awaiting_trained[w])
          TLT_RETURN_IF_ERROR(send_to(w, {{"op", "stop"}, {"sent_at", now_s()}}));
    }
    // The step ends once every trainer stopped and every worker without requests confirmed the
    // step's weights (its reply must not spill into the next step).
    auto any = [](const std::vector<bool>& v) {
      return std::find(v.begin(), v.end(), true) != v.end();
    };
    if (stop_sent && !any(awaiting_trained) && !any(no_requests)) break;
  }
  double before_idle = 0, before_reclaimed = 0;
  StatusOr<std::vector<int>> preempted = coord.end_step(rollout_end);
  if (!preempted.ok()) return preempted.status();
  r->idle_worker_seconds = coord.idle_seconds() - before_idle;
  r->reclaimed_worker_seconds = coord.reclaimed_seconds() - before_reclaimed;
  for (int64_t w = 0; w < n; ++w)
    if (present(w)) mark(int(w), "idle", now_s() - t0);
  r->rollout_seconds = rollout_end;
  r->accept_length = req_spec ? double(accepted + req_spec) / double(req_spec) : 0.0;
  TLT_RETURN_IF_ERROR(merge_drafters(drafter_parts));
  r->drafter_version = drafter_version_;
  // Old buffers rotate out.
  std::error_code ec;
  for (int64_t w = 0; w < n; ++w)
    fs::remove(plan_.run_dir + "/buffer/step-" + std::to_string(step - plan_.buffer_steps) + "-w" +
                   std::to_string(w) + ".pt",
               ec);
  std::vector<std::vector<int64_t>> group_prompts;
  for (int64_t i = 0; i < p_count * g; ++i) group_prompts.push_back(prompts[i / g]);
  TLT_RETURN_IF_ERROR(update_policy(step, problems, group_prompts, responses, r));
  r->step_seconds = now_s() - t0;
  return Status::Ok();
}

Status Driver::update_policy(int64_t step, const std::vector<Problem>& problems,
                             const std::vector<std::vector<int64_t>>& prompts,
                             const std::vector<std::vector<int64_t>>& responses, StepReport* r) {
  int64_t g = plan_.group_size, b = int64_t(responses.size());
  std::vector<float> rewards(static_cast<size_t>(b), 0.f);
  std::vector<double> lens;
  for (int64_t i = 0; i < b; ++i) {
    rewards[i] = float(task_->reward(problems[i / g], decode_text(responses[i])));
    lens.push_back(double(responses[i].size()));
    r->reward_mean += rewards[i] / double(b);
  }
  r->len_p50 = percentile(lens, 0.5), r->len_p90 = percentile(lens, 0.9);
  r->len_p99 = percentile(lens, 0.99), r->len_max = percentile(lens, 1.0);
  torch::Tensor adv = group_advantages(torch::tensor(rewards).view({b / g, g})).view({b});  // (B,)
  SequenceBatch batch = make_batch(prompts, responses);
  UpdateStats us = trainer_->update(batch, adv);
  r->update_seconds = us.seconds, r->kl = us.kl, r->clip_fraction = us.clip_fraction;
  r->loss = us.loss;
  return model::save_checkpoint(*policy_, policy_path(step), "policy v" + std::to_string(step));
}

Status Driver::save_checkpoint(int64_t step) {
  if (plan_.checkpoint_dir.empty() || step <= 0 || step == last_saved_) return Status::Ok();
  std::string dir = plan_.checkpoint_dir + "/step-" + std::to_string(step);
  TLT_RETURN_IF_ERROR(trainer_->save(dir, "rl step " + std::to_string(step)));
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*drafter_, dir + "/drafter.ckpt",
                                             "drafter v" + std::to_string(drafter_version_)));
  json steps = json::array();
  for (const StepReport& s : result_.steps) steps.push_back(to_json(s));
  json state = {{"step", step},
                {"drafterVersion", drafter_version_},
                {"heldOutBefore", result_.held_out_before},
                {"heldOutBeforePerProblem", result_.held_out_before_per_problem},
                {"steps", steps}};
  {
    std::ofstream f(dir + "/state.json.tmp");
    f << state.dump() << "\n";
    if (!f) return Status::Unavailable(dir + "/state.json: cannot write");
  }
  std::error_code ec;
  fs::rename(dir + "/state.json.tmp", dir + "/state.json", ec);
  {
    std::ofstream f(plan_.checkpoint_dir + "/latest.tmp");
    f << "step-" << step << "\n";
  }
  fs::rename(plan_.checkpoint_dir + "/latest.tmp", plan_.checkpoint_dir + "/latest", ec);
  if (ec) return Status::Unavailable(plan_.checkpoint_dir + "/latest: " + ec.message());
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
  TLT_RETURN_IF_ERROR(init_models());
  if (plan_.resume) TLT_RETURN_IF_ERROR(load_checkpoint());
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*policy_, policy_path(start_step_), "policy"));
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*drafter_, drafter_path(drafter_version_), "drafter"));
  if (result_.held_out_before_per_problem.empty()) {
    // The reference is the warm start, also after --resume.
    StatusOr<HeldOutResult> before =
        evaluate_held_out(reference_, *task_, plan_.held_out, plan_.max_response_tokens,
                          plan_.temperature, kHeldOutSamples, plan_.seed);
    if (!before.ok()) return before.status();
    result_.held_out_before = before->reward;
    result_.held_out_before_per_problem = before->per_problem;
    log("held-out reward of the warm start (" + std::to_string(plan_.held_out) + " problems x " +
        std::to_string(kHeldOutSamples) + " samples): " + std::to_string(before->reward));
  }
  signal(SIGPIPE, SIG_IGN);
  procs_.resize(size_t(plan_.workers));
  for (int w = 0; w < plan_.workers; ++w)
    if (!optional_worker(w)) TLT_RETURN_IF_ERROR(spawn(w));
  TLT_RETURN_IF_ERROR(await_drafter_pods());
  for (int64_t step = start_step_ + 1; step <= plan_.steps; ++step) {
    StepReport r;
    Status st = run_step(step, &r);
    if (st.code() == StatusCode::kAborted && stopping()) {
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
  shutdown();
  if (result_.interrupted) {
    // The last completed step (reports of resumed runs carry the earlier steps too).
    TLT_RETURN_IF_ERROR(
        save_checkpoint(result_.steps.empty() ? start_step_ : result_.steps.back().step));
    return result_;
  }
  StatusOr<HeldOutResult> after =
      evaluate_held_out(policy_, *task_, plan_.held_out, plan_.max_response_tokens,
                        plan_.temperature, kHeldOutSamples, plan_.seed);
  if (!after.ok()) return after.status();
  result_.held_out_after = after->reward;
  result_.held_out_after_per_problem = after->per_problem;
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
