#include "runtime/rl/weight_publisher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "runtime/clock.h"
#include "runtime/cluster/job_secret.h"
#include "runtime/rl/run_dir.h"

namespace tlt::rl {
namespace fs = std::filesystem;
using nlohmann::json;
using runtime::now_s;

WeightSyncAuth weight_sync_auth(const std::string& secret, int64_t generation,
                                const std::string& nonce) {
  const std::string g = std::to_string(generation) + " " + nonce;
  WeightSyncAuth a;
  a.store_prefix = "tlt-ws/" + cluster::hmac_hex(secret, "weight-sync store " + g);
  std::string key = cluster::hmac_hex(secret, "weight-sync publish " + g);
  a.mac = [key](const std::string& statement) { return cluster::hmac_hex(key, statement); };
  return a;
}

WeightPublisher::WeightPublisher(const RLRunPlan& plan, LogFn log)
    : plan_(plan), log_(std::move(log)) {}

WeightPublisher::~WeightPublisher() = default;

int WeightPublisher::rollout_workers() const {
  return int(plan_.rollout_workers());
}

Status WeightPublisher::read_mode() {
  const char* mode = std::getenv("TLT_WEIGHT_SYNC");
  std::string m = mode ? mode : "";
  if (!m.empty() && m != "gloo" && m != "nccl" && m != "file")
    return Status::InvalidArgument("TLT_WEIGHT_SYNC=" + m +
                                   ": expected gloo (the default), nccl or file");
  file_only_ = m == "file";
  if (m == "nccl") {
#ifdef TLT_GPU
    // NCCL wants one device per rank: pods with a GPU each, not ranks sharing one GPU.
    cuda_ = true;
#else
    return Status::InvalidArgument(
        "TLT_WEIGHT_SYNC=nccl needs the GPU flavour (built with TLT_GPU); use gloo");
#endif
  }
  return Status::Ok();
}

WeightSyncOptions WeightPublisher::sync_options(int world) const {
  WeightSyncOptions o;
  o.rank = 0, o.world = world;
  // A member that vanishes mid-publish is noticed after this (a broadcast of one bucket takes
  // well under a second); TLT_WEIGHT_SYNC_TIMEOUT_S overrides it.
  o.timeout_s = kSyncTimeoutS;
  o.cuda = cuda_;
  const char* timeout = std::getenv("TLT_WEIGHT_SYNC_TIMEOUT_S");
  if (timeout && std::atoi(timeout) > 0) o.timeout_s = std::atoi(timeout);
  if (plan_.listen_port > 0) {
    o.port = plan_.weight_sync_port;
    o.host = plan_.listen_loopback ? "127.0.0.1" : "0.0.0.0";
    o.rendezvous_timeout_s = plan_.connect_timeout_s;
  }
  return o;
}

std::string WeightPublisher::store_dir() {
  const std::string dir = weight_sync_dir(plan_.run_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  struct stat st{};
  if (ec || ::chmod(dir.c_str(), 0700) != 0 || ::lstat(dir.c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    log("weight sync: " + dir + " cannot be made a private directory (0700, owned by this user)" +
        (ec ? ": " + ec.message() : "") + "; the workers load checkpoint files");
    return "";
  }
  return dir;
}

std::unique_ptr<WeightSync> WeightPublisher::open_generation(int world, int rendezvous_timeout_s) {
  ++generation_;
  StatusOr<std::string> nonce = cluster::random_nonce();
  if (!nonce.ok()) {
    log("weight sync: generation " + std::to_string(generation_) + ": " + nonce.status().message());
    return nullptr;
  }
  WeightSyncOptions o = sync_options(world);
  o.rendezvous_timeout_s = rendezvous_timeout_s;
  o.auth = weight_sync_auth(secret_, generation_, *nonce);
  if (plan_.listen_port <= 0) {
    std::string dir = store_dir();
    if (dir.empty()) return nullptr;
    o.store_file = dir + "/g" + std::to_string(generation_) + "-" + *nonce;
  }
  StatusOr<std::unique_ptr<WeightSync>> s = WeightSync::open(o);
  if (!s.ok()) {
    log("weight sync: generation " + std::to_string(generation_) + ": " + s.status().message());
    return nullptr;
  }
  invite_ = WeightSyncInvite{};
  invite_.generation = generation_, invite_.nonce = *nonce;
  invite_.rank = 1, invite_.world = world;
  invite_.port = (*s)->port(), invite_.store = o.store_file;
  invite_.rendezvous_timeout_s = o.rendezvous_timeout_s, invite_.timeout_s = o.timeout_s;
  invite_.bucket_bytes = o.bucket_bytes, invite_.cuda = o.cuda;
  return std::move(*s);
}

void WeightPublisher::open(WorkerPool* pool) {
  pool_ = pool;
  if (file_only_) return;
  StatusOr<std::string> secret = cluster::ensure_job_secret(plan_.listen_port <= 0);
  if (!secret.ok()) {
    log("weight sync: " + secret.status().message() + "; the workers load checkpoint files");
    return;
  }
  secret_ = std::move(*secret);
  members_.clear();
  for (int w = 0; w < rollout_workers(); ++w) members_.push_back(w);
  const int world = rollout_workers() + 1;
  sync_ = open_generation(world, sync_options(world).rendezvous_timeout_s);
  if (!sync_) {
    log("weight sync: no group; the workers load checkpoint files");
    return;
  }
  wanted_ = true;
  log(std::string("weight sync: ") + (cuda_ ? "NCCL" : "Gloo") + " group of " +
      std::to_string(world) + " ranks " +
      (invite_.store.empty() ? "on port " + std::to_string(sync_->port())
                             : "at " + invite_.store + " (nothing listens beyond 127.0.0.1)"));
}

void WeightPublisher::add_to_setup(int w, json* setup) {
  if (starting_ && sync_ && w < rollout_workers()) {
    WeightSyncInvite g = invite_;
    g.rank = w + 1;
    (*setup)["weight_sync"] = to_json(g);
  } else if (wanted_) {
    lost_ = true;  // a restarted worker or a new drafter pod: it joins the next generation
  }
}

void WeightPublisher::join_first() {
  if (!sync_) return;
  Status joined = sync_->join();
  if (joined.code() == StatusCode::kUnimplemented) {  // a build without Gloo: no generation forms
    wanted_ = false;
    log("weight sync: " + joined.message() + "; the workers load checkpoint files from now on");
    sync_.reset();
  } else if (!joined.ok()) {
    break_group(joined.message());
  }
}

std::vector<int> WeightPublisher::weight_holders() const {
  std::vector<int> ws;
  for (int w = 0; w < pool_->size(); ++w)
    if (w < rollout_workers() || pool_->present(w)) ws.push_back(w);
  return ws;
}

void WeightPublisher::mark_held(int w, const WeightsAck& ack) {
  if (plan_.listen_port <= 0) return;  // local workers read the run directory's files
  Channel& ch = pool_->channel(w);
  if (ack.policy_version >= 0) ch.mark_mirrored(policy_path(plan_.run_dir, ack.policy_version));
  if (ack.drafter_version >= 0) ch.mark_mirrored(drafter_path(plan_.run_dir, ack.drafter_version));
}

void WeightPublisher::break_group(const std::string& why) {
  log("weight sync: generation " + std::to_string(generation_) + " broke: " + why +
      "; the workers load checkpoint files until the next generation");
  close_group();
}

void WeightPublisher::close_group() {
  sync_.reset();
  if (!invite_.store.empty()) {
    std::error_code ec;
    fs::remove(invite_.store, ec);  // its ranks are gone or going: no one meets there again
  }
}

bool WeightPublisher::regroup() {
  lost_ = false;
  close_group();  // the old generation's store and connections
  members_ = weight_holders();
  const int world = int(members_.size()) + 1;
  sync_ = open_generation(world, 60);  // every member is connected: it joins at once
  Status joined = sync_ ? Status::Ok() : Status::Unavailable("the group could not be opened");
  if (sync_) {
    for (size_t i = 0; i < members_.size(); ++i) {
      WeightSyncInvite g = invite_;
      g.rank = int(i) + 1;
      json m = to_json(g);
      m["op"] = "weight_sync";
      if (!pool_->send(members_[i], m).ok()) break;  // the join below fails and says so
    }
    joined = sync_->join();
  }
  const std::string gen = "weight sync: generation " + std::to_string(generation_) + ": ";
  if (!joined.ok()) {
    close_group();
    if (++failed_ >= kMaxFailedGenerations) {
      wanted_ = false;
      log(gen + joined.message() + "; the workers load checkpoint files from now on");
    } else {
      log(gen + joined.message() + "; the workers load checkpoint files this step");
    }
    return false;
  }
  failed_ = 0;
  std::string ws;
  for (int w : members_) ws += (ws.empty() ? "" : ",") + std::to_string(w);
  log("weight sync: group generation " + std::to_string(generation_) + " of " +
      std::to_string(world) + " ranks (workers " + ws + ") " +
      (invite_.store.empty() ? "on port " + std::to_string(sync_->port()) : "at " + invite_.store));
  return true;
}

StatusOr<std::string> WeightPublisher::collect_answer(int w, int64_t policy_version,
                                                      StepReport* r) {
  StatusOr<std::optional<json>> reply =
      pool_->present(w) ? pool_->channel(w).receive(600 * 1000)
                        : StatusOr<std::optional<json>>(Status::Unavailable("gone"));
  if (!reply.ok() || !*reply) return "worker " + std::to_string(w) + " did not acknowledge";
  StatusOr<WeightsAck> ack = decode_weights_ack(**reply, w, policy_version, drafter_version_);
  if (!ack.ok()) {
    log("weight sync: " + ack.status().message() + "; the worker is treated as failed");
    if (pool_->optional(w)) {
      pool_->drop(w, ack.status().message());
    } else {
      Status restarted = pool_->restart(w);
      if (!restarted.ok()) return restarted;
    }
    return ack.status().message();
  }
  r->weight_sync_refused += ack->refused;
  mark_held(w, *ack);
  return ack->error.empty() ? "" : "worker " + std::to_string(w) + ": " + ack->error;
}

Status WeightPublisher::publish(int64_t step, torch::nn::Module& policy, torch::nn::Module& drafter,
                                int64_t drafter_version, StepReport* r) {
  if (!wanted_) return Status::Ok();
  double t = now_s();
  drafter_version_ = drafter_version;
  bool regroup_now = !sync_ || lost_ || weight_holders() != members_;
  if (regroup_now && !regroup()) {
    r->publish_seconds += now_s() - t;
    return Status::Ok();
  }
  int64_t dv = drafter_version != synced_drafter_ ? drafter_version : -1;
  json m = to_json(WeightsMessage{step - 1, dv});
  std::string error;
  std::vector<int> told;  // the members that take part: each replies
  for (int w : members_) {
    Status st = pool_->present(w) ? pool_->send(w, m) : Status::Unavailable("gone");
    if (st.ok())
      told.push_back(w);
    else if (error.empty())
      error = "worker " + std::to_string(w) + ": " + st.message();
  }
  const char* corrupt = std::getenv("TLT_WEIGHT_SYNC_CORRUPT");  // a test hook: a policy version
  int64_t bad = corrupt && std::atoll(corrupt) == step - 1 ? 0 : -1;
  Status st = error.empty()
                  ? sync_->publish(WeightKind::kPolicy, step - 1, synced_tensors(policy), bad)
                  : Status::Unavailable(error);
  if (st.ok() && dv >= 0) st = sync_->publish(WeightKind::kDrafter, dv, synced_tensors(drafter));
  if (st.ok()) synced_drafter_ = drafter_version;
  if (!st.ok()) {
    error = st.message();
    break_group(error);
  }
  for (int w : told) {
    StatusOr<std::string> why = collect_answer(w, step - 1, r);
    if (!why.ok()) return why.status();
    if (!why->empty() && error.empty()) error = *why;
  }
  r->publish_seconds += now_s() - t;
  if (sync_ && !error.empty()) break_group(error);
  return Status::Ok();
}

}  // namespace tlt::rl
