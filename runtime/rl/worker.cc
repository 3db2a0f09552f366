#include "runtime/rl/worker.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>

#include "runtime/clock.h"
#include "runtime/cluster/job_secret.h"
#include "runtime/device/busy.h"
#include "runtime/device/device.h"
#include "runtime/drafter/buffer.h"
#include "runtime/drafter/trainer.h"
#include "runtime/io/atomic_file.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/config.h"
#include "runtime/model/model_source.h"
#include "runtime/rl/channel.h"
#include "runtime/rl/messages.h"
#include "runtime/rl/rendezvous.h"
#include "runtime/rl/run_dir.h"
#include "runtime/rl/spot_work.h"
#include "runtime/rl/weight_publisher.h"
#include "runtime/rl/weight_sync.h"
#include "runtime/rl/worker_options.h"
#include "runtime/rollout/engine.h"
#include "runtime/rollout/spec_options.h"
#include "runtime/torch_env.h"

namespace tlt::rl {
namespace {

using nlohmann::json;
using runtime::now_s;

// A message's "op", or "" when it has none (or it is not a string).
std::string message_op(const json& m) {
  if (!m.is_object()) return "";
  auto it = m.find("op");
  return it != m.end() && it->is_string() ? it->get<std::string>() : "";
}

class Worker {
 public:
  Worker(int in_fd, int out_fd) : ch_(in_fd, out_fd) {}
  void mirror_files(const std::string& dir) { ch_.mirror_files(dir, worker_mirror_rules()); }
  // Where the weight-sync group's store is: the driver's host (a remote worker's trainer).
  void set_sync_host(const std::string& host) { sync_host_ = host; }
  int loop();

 private:
  Status setup(const json& m);
  Status generate(const json& m);
  Status train(const json& m);
  Status load_weights(const GenerateMessage& g);
  // The engine's statistics of the last generate call, as its `generated` reply carries them.
  GeneratedStats generated_stats(int64_t bandit_absorbed) const;
  // Absorbs the other workers' bandit steps; returns how many did not fit this worker's bandit.
  int64_t absorb_peers(const std::vector<BanditStep>& peers);
  Status join_weight_sync(const WeightSyncInvite& g);
  Status rejoin_weight_sync(const json& m);
  Status receive_weights(const json& m);

  Channel ch_;
  int index_ = 0;
  std::string dir_;
  WorkerContext ctx_;  // what the driver's messages are checked against (set up by `setup`)
  bool set_up_ = false;
  model::Transformer target_{nullptr};
  model::Drafter drafter_{nullptr};
  std::unique_ptr<rollout::Engine> engine_;
  std::unique_ptr<drafter::DrafterTrainer> trainer_;
  std::unique_ptr<WeightSync> sync_;  // the setup message's weight-sync group, if it named one
  // Its GPU's busy share over each generate and train call; null on the CPU or without NVML.
  std::unique_ptr<device::BusyMeter> busy_;
  bool precision_said_ = false;  // a GPU worker logs its decoding precision and why, once
  std::string sync_host_ = "127.0.0.1";
  int64_t policy_version_ = -1, drafter_version_ = -1;
  int64_t drafter_batch_ = 32;
  // spec.drafter.vocabSubset: drafts range over the tokens this worker generated most often.
  int64_t drafter_vocab_ = 0;
  std::vector<int64_t> token_counts_;  // generated tokens per id, over every step so far
  std::vector<std::vector<torch::Tensor>> train_data_;
  std::mt19937_64 rng_{0};
};

// The policy's architecture: the model card a pretrained policy's driver sends (its weights come
// with the first generate message, as a preset's do), else the preset.
StatusOr<model::ModelConfig> model_config(const WorkerOptions& o) {
  if (o.model_card.empty()) return model::preset_config(o.preset, o.vocab);
  StatusOr<model::ModelCard> c =
      model::model_card_from_json(o.model_card, "the setup message's model");
  if (!c.ok()) return c.status();
  return c->config.config;
}

Status Worker::setup(const json& m) {
  StatusOr<WorkerOptions> opts = worker_options_from_json(m);
  if (!opts.ok()) return opts.status();
  const WorkerOptions& o = *opts;
  const api::DrafterSpec& d = o.drafter;
  index_ = o.index;
  dir_ = o.dir;
  if (o.core >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.core, &set);
    sched_setaffinity(0, sizeof set, &set);  // best effort: a cgroup may forbid it
    runtime::configure_threads(1);
  }
  StatusOr<model::ModelConfig> cfg = model_config(o);
  if (!cfg.ok()) return cfg.status();
  StatusOr<model::DrafterFeatures> features = model::parse_drafter_features(d.features);
  if (!features.ok()) return features.status().with_context("setup message: drafter.features");
  // spec.model.device resolved here: this worker's share of the GPUs it sees, or the CPU. A
  // device it cannot have ends the worker with the error (the driver checked the same request).
  StatusOr<device::Placement> placement =
      device::resolve_device(o.device, device::probe_inventory());
  if (!placement.ok()) return placement.status();
  const std::string dev = placement->process_device(index_);
  TLT_RETURN_IF_ERROR(device::make_current(dev));
  std::string no_meter;
  busy_ = device::busy_meter_for(dev, &no_meter);
  if (!busy_ && placement->cuda)
    std::cerr << "tlt rl-worker " << index_ << ": GPU busy ratio: " << no_meter << "\n";
  target_ = model::Transformer(*cfg);
  target_->to(torch::Device(dev));  // the weights come with the first generate message
  target_->eval();
  drafter_ = model::Drafter(target_, d.layers, *features);
  // Speculation is switched per generate message (the driver's baseline turns it off).
  rollout::EngineOptions eo = rollout::engine_options(o.speculative);
  eo.max_batch = o.max_batch;
  eo.max_seq = std::min(cfg->max_seq, o.max_seq);
  eo.seed = o.seed + uint64_t(index_);
  eo.bfloat16 = o.decode_bfloat16;
  eo.reproducible = true;  // a request's tokens depend on its seed only (restarts, --resume)
  StatusOr<std::unique_ptr<rollout::Engine>> e = rollout::Engine::create(target_, drafter_, eo);
  if (!e.ok()) return e.status();
  engine_ = std::move(*e);
  trainer_ = std::make_unique<drafter::DrafterTrainer>(drafter_, target_, d.training.learning_rate,
                                                       d.train_levels, o.drafter_bfloat16);
  drafter_batch_ = d.training.batch_size;
  drafter_vocab_ = d.vocab_subset;
  token_counts_.assign(size_t(cfg->vocab), 0);
  // The drafter warm start's draft vocabulary (a pretrained model's) ranks first until this
  // worker's own generations outnumber it.
  for (int64_t id : o.drafter_vocab_ids)
    if (id >= 0 && id < cfg->vocab) token_counts_[size_t(id)] = 1;
  rng_.seed(eo.seed);
  ctx_.dir = dir_, ctx_.vocab = cfg->vocab, ctx_.max_seq = eo.max_seq;
  set_up_ = true;
  return m.contains("weight_sync") ? rejoin_weight_sync(m.at("weight_sync")) : Status::Ok();
}

// Leaves the group it was in and joins generation g of the driver's (blocks until every rank
// has): at g's store file (a local run), else at the sync host and g's port, or at
// TLT_WEIGHT_SYNC_ADDRESS (host:port, a cluster pod's env) when it is set. Its proof comes from
// the job secret (TLT_JOB_SECRET or the mounted file) and g's nonce. A worker in no group loads
// the checkpoint files.
Status Worker::join_weight_sync(const WeightSyncInvite& g) {
  sync_.reset();
  StatusOr<std::string> secret = cluster::load_job_secret();
  if (!secret.ok()) return secret.status().with_context("weight-sync group");
  WeightSyncOptions o;
  o.auth = weight_sync_auth(*secret, g.generation, g.nonce);
  o.rendezvous_timeout_s = g.rendezvous_timeout_s, o.timeout_s = g.timeout_s;
  o.rank = g.rank, o.world = g.world;
  o.store_file = g.store;
  o.host = sync_host_, o.port = g.port;
  const char* address = std::getenv("TLT_WEIGHT_SYNC_ADDRESS");
  if (g.store.empty() && address && *address) {
    std::string a = address;
    size_t colon = a.rfind(':');
    int port = colon == std::string::npos ? 0 : std::atoi(a.c_str() + colon + 1);
    if (colon == 0 || port <= 0 || port > 65535)
      return Status::InvalidArgument("TLT_WEIGHT_SYNC_ADDRESS=" + a + ": expected host:port");
    o.host = a.substr(0, colon), o.port = port;
  }
  o.bucket_bytes = g.bucket_bytes;
  o.cuda = g.cuda;
  StatusOr<std::unique_ptr<WeightSync>> s = WeightSync::open(o);
  if (!s.ok()) return s.status();
  TLT_RETURN_IF_ERROR((*s)->join());
  sync_ = std::move(*s);
  return Status::Ok();
}

// The setup message's group or {"op": "weight_sync", ...}, a new generation. An invitation that
// does not decode ends this worker (the driver restarts it); a failed join is no error here: the
// driver's join fails too and it ends the generation, and this worker loads the files.
Status Worker::rejoin_weight_sync(const json& m) {
  StatusOr<WeightSyncInvite> g = decode_weight_sync(m, ctx_);
  if (!g.ok()) return g.status();
  Status st = join_weight_sync(*g);
  if (!st.ok()) std::cerr << "tlt rl-worker " << index_ << ": " << st.message() << "\n";
  return Status::Ok();
}

// {"op": "weights", "policy_version": P, "drafter_version": D (-1: unchanged)}: takes part in
// the driver's publishes, then replies {"op": "weights", "worker", "policy_version",
// "drafter_version" (the versions now held), "refused" (publishes refused: corrupt or stale),
// "error" (the group broke: "" when it did not)}. A refused or failed version is loaded from its
// file by the next generate message instead.
Status Worker::receive_weights(const json& m) {
  StatusOr<WeightsMessage> w = decode_weights(m);
  if (!w.ok()) return w.status();
  int64_t refused = 0;
  std::string error;
  auto take = [&](WeightKind kind, int64_t v, torch::nn::Module& module, int64_t* held) {
    Status st = sync_ ? sync_->receive(kind, v, synced_tensors(module))
                      : Status::FailedPrecondition("this worker is in no weight-sync group");
    if (st.ok()) {
      *held = v;
      return;
    }
    std::cerr << "tlt rl-worker " << index_ << ": " << st.message() << "\n";
    if (st.code() == StatusCode::kCorruption)
      ++refused;
    else if (error.empty())
      error = st.message();
  };
  take(WeightKind::kPolicy, w->policy_version, *target_, &policy_version_);
  if (w->drafter_version >= 0)
    take(WeightKind::kDrafter, w->drafter_version, *drafter_, &drafter_version_);
  WeightsAck ack;
  ack.worker = index_, ack.policy_version = policy_version_, ack.drafter_version = drafter_version_;
  ack.refused = refused, ack.error = error;
  return ch_.send(to_json(ack));
}

Status Worker::load_weights(const GenerateMessage& g) {
  if (g.policy_version != policy_version_) {
    StatusOr<std::string> meta = model::load_checkpoint(*target_, g.policy);
    if (!meta.ok()) return meta.status();
    policy_version_ = g.policy_version;
  }
  if (g.drafter_version >= 0 && g.drafter_version != drafter_version_) {
    StatusOr<std::string> meta = model::load_drafter_checkpoint(drafter_, g.drafter);
    if (!meta.ok()) return meta.status();
    drafter_version_ = g.drafter_version;
  }
  return Status::Ok();
}

int64_t Worker::absorb_peers(const std::vector<BanditStep>& peers) {
  rollout::ArmSelector& bandit = engine_->selector();
  int64_t misfits = 0;
  for (const BanditStep& p : peers)  // absorb() changes nothing for a step that does not fit
    if (!bandit.absorb({p.batch, p.arm, p.context, p.tokens, p.seconds, p.explore_cost})) ++misfits;
  return misfits;
}

Status Worker::generate(const json& m) {
  if (!set_up_) return Status::FailedPrecondition("generate before setup");
  StatusOr<GenerateMessage> g = decode_generate(m, ctx_);
  if (!g.ok()) return g.status();
  TLT_RETURN_IF_ERROR(load_weights(*g));
  double start = now_s();
  if (busy_) busy_->begin();
  int64_t step = g->step;
  std::vector<rollout::Request> reqs;
  drafter::HiddenBuffer buffer;
  for (const GenerateRequest& r : g->requests) {
    rollout::Request q;
    q.id = r.id, q.prompt = r.prompt, q.max_new_tokens = r.max_new;
    q.stop_token = r.stop, q.more_stop_tokens = r.more_stop;  // a model's other ends
    q.seed = r.seed;
    q.sampling.temperature = r.temperature, q.sampling.top_p = r.top_p;
    buffer.add_request(q.id, int64_t(q.prompt.size()));
    reqs.push_back(std::move(q));
  }
  bool collect = g->collect_hidden;
  engine_->set_hidden_sink(collect ? buffer.sink() : nullptr);
  engine_->set_speculative(g->speculative);
  if (drafter_vocab_ > 0 &&
      std::any_of(token_counts_.begin(), token_counts_.end(), [](int64_t c) { return c > 0; })) {
    // Before the first step nothing was generated (and no warm start named a vocabulary): the
    // drafter keeps the full vocabulary.
    TLT_RETURN_IF_ERROR(
        drafter_->set_draft_vocab(model::most_frequent_tokens(token_counts_, drafter_vocab_)));
  }
  // The bandit pools what the workers measured (spec.speculative.selector.pooled): it counts the
  // other workers' steps of the last step, and keeps its own for them.
  rollout::ArmSelector& bandit = engine_->selector();
  bool pool = g->pool_bandit;
  bandit.keep_observations(pool);
  if (pool) bandit.set_trial_offset(int32_t(index_));  // the workers try different arms first
  (void)bandit.take_observations();  // the reply below carries this call's steps only
  // A peer's step of an arm or context this bandit does not have (another worker's bug or
  // mismatched arms) is left out and counted; the rest count as usual.
  const int64_t misfits = absorb_peers(g->bandit_peers);
  const int64_t absorbed = int64_t(g->bandit_peers.size()) - misfits;
  engine_->reset_stats();
  torch::NoGradGuard no_grad;
  // Each response goes to the driver as it finishes (its reward is scored while the tail still
  // generates); the `generated` reply below still carries them all.
  Status streamed = Status::Ok();
  if (g->stream_completions) {
    engine_->set_completion_sink([&](const rollout::Completion& c) {
      if (!streamed.ok()) return;
      Completed done;
      done.step = step, done.policy_version = policy_version_;
      done.response.id = c.id, done.response.tokens = c.tokens;
      streamed = ch_.send(to_json(done));
    });
  }
  StatusOr<std::vector<rollout::Completion>> out = engine_->generate(reqs);
  engine_->set_completion_sink(nullptr);
  if (!out.ok()) return out.status();
  const std::string& precision = engine_->stats().precision;
  if (!precision_said_ && !precision.empty() && target_->lm_head->weight.is_cuda()) {
    std::cerr << "tlt rl-worker " << index_ << ": decoding: " << precision << "\n";
    precision_said_ = true;
  }
  TLT_RETURN_IF_ERROR(streamed);
  Generated done;
  done.step = step, done.worker = index_;
  done.policy_version = policy_version_, done.drafter_version = drafter_version_;
  for (const rollout::Completion& c : *out) {
    for (int64_t t : c.tokens)
      if (t >= 0 && t < int64_t(token_counts_.size())) ++token_counts_[size_t(t)];
    done.responses.push_back({c.id, c.tokens, c.stopped});
  }
  done.stats = generated_stats(absorbed);
  if (misfits > 0)
    std::cerr << "tlt rl-worker " << index_ << ": " << misfits
              << " bandit steps of other workers do not fit this worker's arms\n";
  if (pool) {
    done.stats.has_bandit = true;
    for (const rollout::ArmSelector::Observation& o : bandit.take_observations())
      done.stats.bandit.push_back(
          {o.batch_size, o.arm, o.context, o.tokens, o.seconds, o.explore_cost});
  }
  if (collect) {
    done.buffer = buffer_path(dir_, step, index_);
    // Read once by the driver in the same step: a crash loses the step anyway, so no sync.
    TLT_RETURN_IF_ERROR(io::atomic_write(
        done.buffer,
        [&](std::ostream& out) {
          torch::save(buffer.tensors(), out);
          return Status::Ok();
        },
        io::Sync::kNone));
  }
  done.seconds = now_s() - start;
  if (busy_) done.device_busy = busy_->end().value_or(-1.0);
  return ch_.send(to_json(done));
}

GeneratedStats Worker::generated_stats(int64_t bandit_absorbed) const {
  const rollout::EngineStats& st = engine_->stats();
  GeneratedStats out;
  out.tokens = st.tokens, out.plain_steps = st.plain_steps, out.spec_steps = st.spec_steps;
  out.request_spec_steps = st.request_spec_steps, out.accepted = st.accepted;
  for (size_t a = 0; a < engine_->arms().size() && a < st.arm_steps.size(); ++a)
    if (st.arm_steps[a] > 0) out.arms[engine_->arms()[a].name] = st.arm_steps[a];
  if (st.plain_chosen > 0) out.arms["plain"] = st.plain_chosen;
  out.copied = st.copied_drafts;
  for (const auto& [phase, seconds] : st.phases.named(st.seconds)) out.phases[phase] = seconds;
  out.draft_vocab = st.spec_steps > 0 ? drafter_->draft_vocab_size() : 0;
  out.bandit_absorbed = bandit_absorbed;
  return out;
}

Status Worker::train(const json& m) {
  if (!set_up_) return Status::FailedPrecondition("train before setup");
  StatusOr<TrainMessage> tm = decode_train(m, ctx_);
  if (!tm.ok()) return tm.status();
  double start = now_s();
  if (busy_) busy_->begin();
  int64_t step = tm->step;
  train_data_.clear();
  for (const std::string& p : tm->buffers) {
    std::vector<torch::Tensor> d;
    try {
      torch::load(d, p);
    } catch (const c10::Error& e) {
      continue;  // a buffer the driver has already rotated away; train on the others
    }
    if (drafter::is_packed_buffer(d))  // a buffer of an older layout is left out
      train_data_.push_back(std::move(d));
  }
  int64_t steps = 0;
  double first = -1, last = -1, stop_latency = 0;
  // Optimizer steps run as spot work (runtime/rl/spot_work.h): on their own thread at the lowest
  // CPU priority, preempted within a step. This thread waits for the driver's stop.
  std::optional<SpotWork> spot;
  if (!train_data_.empty()) {
    spot.emplace([&](const std::atomic<bool>& stopping) {
      std::vector<torch::Tensor> b = drafter::sample_windows(train_data_, drafter_batch_, rng_);
      // A stop abandons the step under way (its update is not applied): the policy update waits
      // for this thread, and a step of SmolLM2's drafter at 3 levels takes about a second.
      std::optional<double> loss = trainer_->try_step(
          b[0], b[1], b[2], [&] { return stopping.load(std::memory_order_acquire); });
      if (!loss) return;
      last = *loss;
      if (first < 0) first = last;
      ++steps;
    });
  }
  for (;;) {
    StatusOr<std::optional<json>> msg = ch_.receive(100);
    if (!msg.ok()) return msg.status();
    if (!*msg) continue;
    const json& s = **msg;
    if (message_op(s) != "stop")
      return Status::FailedPrecondition(
          "expected stop while training, got " +
          s.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 120));
    StatusOr<StopMessage> stop = decode_stop(s);
    if (!stop.ok()) return stop.status();
    if (spot) TLT_RETURN_IF_ERROR(spot->stop());  // the step under way gives up part-way
    if (stop->sent_at >= 0) stop_latency = now_s() - stop->sent_at;
    break;
  }
  Trained reply;
  reply.step = step, reply.worker = index_, reply.steps = steps;
  if (steps > 0) {
    reply.drafter = worker_drafter_path(dir_, index_);
    TLT_RETURN_IF_ERROR(
        model::save_checkpoint(*drafter_, reply.drafter, "worker drafter", io::Sync::kNone));
  }
  reply.loss_first = first, reply.loss_last = last, reply.stop_latency_s = stop_latency;
  reply.seconds = now_s() - start;
  if (busy_) reply.device_busy = busy_->end().value_or(-1.0);
  return ch_.send(to_json(reply));
}

int Worker::loop() {
  for (;;) {
    StatusOr<std::optional<json>> msg = ch_.receive(-1);
    if (!msg.ok()) return msg.status().code() == StatusCode::kUnavailable ? 0 : 2;
    if (!*msg) continue;
    const json& m = **msg;
    std::string op = message_op(m);
    Status st;
    try {
      if (op == "setup")
        st = setup(m);
      else if (op == "generate")
        st = generate(m);
      else if (op == "train")
        st = train(m);
      else if (op == "weights")
        st = receive_weights(m);
      else if (op == "weight_sync")
        st = rejoin_weight_sync(m);
      else if (op == "stop")
        continue;  // a stop that crossed our `trained` reply
      else if (op == "exit")
        return 0;
      else
        st = Status::InvalidArgument("unknown message op \"" + op + "\"");
    } catch (const std::exception& e) {
      st = Status::Internal(std::string("worker: ") + e.what());
    }
    if (!st.ok()) {
      std::cerr << "tlt rl-worker " << index_ << ": " << op << ": " << st.message() << "\n";
      return 1;
    }
  }
}

}  // namespace

int run_worker(int in_fd, int out_fd, const std::string& mirror_dir) {
  Worker w(in_fd, out_fd);
  if (!mirror_dir.empty()) w.mirror_files(mirror_dir);
  return w.loop();
}

namespace {

// A remote worker: files mirrored under `dir`, the weight-sync group at `host` (the trainer).
int serve_remote(int fd, const std::string& dir, const std::string& host) {
  Worker w(fd, fd);
  w.mirror_files(dir);
  w.set_sync_host(host);
  return w.loop();
}

}  // namespace

int run_remote_worker(const std::string& host, int port, int index, const std::string& work_dir,
                      std::ostream& out, std::ostream& err) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(work_dir) / "buffer", ec);
  if (ec) {
    err << "tlt run-role: " << work_dir << ": " << ec.message() << " (set TLT_WORK_DIR)\n";
    return 1;
  }
  // Without the job's secret the trainer refuses this pod's hello: fail now, saying why.
  StatusOr<std::string> secret = cluster::load_job_secret();
  if (!secret.ok()) {
    err << "tlt run-role: rollout " << index << ": " << secret.status().message() << "\n";
    return 1;
  }
  out << "tlt run-role: rollout " << index << " connecting to the trainer at " << host << ":"
      << port << "\n"
      << std::flush;
  StatusOr<int> fd = connect_worker(host, port, index, *secret, 600 * 1000);
  if (!fd.ok()) {
    err << "tlt run-role: " << fd.status().message() << "\n";
    return 1;
  }
  out << "tlt run-role: rollout " << index << " connected; files under " << work_dir << "\n"
      << std::flush;
  int rc = serve_remote(*fd, work_dir, host);
  ::close(*fd);
  return rc;
}

}  // namespace tlt::rl
