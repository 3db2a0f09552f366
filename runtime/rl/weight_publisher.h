// The RL driver's side of the weight-sync group (runtime/rl/weight_sync.h) over a run: the mode
// (TLT_WEIGHT_SYNC: gloo, the default; nccl; file: no group), the generations of the group, each
// generation's proof of the job secret, and each step's publish with its members' answers.
//
// Generations: the first is opened before the workers start (the rollout workers' setup
// messages carry its invitation; drafter slots join the next one) and joined once they run.
// Before each step's rollout, when the members changed (a worker restarted, a drafter pod joined
// or left) or the last generation broke, every weight holder is invited on its channel to a new
// one. A generation that does not form leaves the workers on the checkpoint files for the step;
// after kMaxFailedGenerations in a row the group is let go for the rest of the run.
//
// The proof: generation g with nonce N (fresh per generation, sent in the invitation) has the
// store prefix and publish key weight_sync_auth(secret, g, N), HMACs under the job secret
// (runtime/cluster/job_secret.h), which never leaves the job's processes. A local run's group
// meets at <run_dir>/weight-sync/g<g>-<N> (the directory private: 0700) and listens on nothing
// but Gloo's loopback sockets; a cluster trainer's at its TCPStore on plan.weight_sync_port.
//
// Errors: read_mode: InvalidArgument for an unknown TLT_WEIGHT_SYNC, or nccl without the GPU
// flavour. publish() returns Ok whatever the group does: a group that cannot be opened, joined
// or published to is logged and the workers load the checkpoint files; a member whose answer is
// malformed (runtime/rl/messages.h) is restarted (a drafter pod dropped), as a dead one.
// Ownership: the pool is borrowed (open()) and outlives the publisher.
// Thread safety: the driver's thread only.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "runtime/rl/messages.h"
#include "runtime/rl/plan.h"
#include "runtime/rl/weight_sync.h"
#include "runtime/rl/worker_pool.h"

namespace tlt::rl {

// The proof of generation `generation` opened with `nonce`, from the job secret: the store
// prefix "tlt-ws/" + HMAC(secret, "weight-sync store <generation> <nonce>") and the MAC under
// HMAC(secret, "weight-sync publish <generation> <nonce>"). The driver and every member derive
// the same; no other use of the secret produces these strings.
WeightSyncAuth weight_sync_auth(const std::string& secret, int64_t generation,
                                const std::string& nonce);

class WeightPublisher {
 public:
  using LogFn = std::function<void(const std::string&)>;
  static constexpr int kMaxFailedGenerations = 3;
  static constexpr int kSyncTimeoutS = 60;  // one broadcast (TLT_WEIGHT_SYNC_TIMEOUT_S)

  WeightPublisher(const RLRunPlan& plan, LogFn log);
  ~WeightPublisher();
  WeightPublisher(const WeightPublisher&) = delete;
  WeightPublisher& operator=(const WeightPublisher&) = delete;

  // Reads TLT_WEIGHT_SYNC; before any model loads.
  Status read_mode();
  // Opens generation 1 for the rollout workers, before `pool` starts them (borrowed).
  void open(WorkerPool* pool);
  // While the pool starts them (set_starting(true)), a rollout worker's setup message gets
  // generation 1's invitation ("weight_sync"); any other setup message (a restarted worker, a
  // drafter pod) means the members changed: they join the next generation.
  void set_starting(bool starting) { starting_ = starting; }
  void add_to_setup(int w, nlohmann::json* setup);
  // After the pool started: rank 0 joins generation 1.
  void join_first();
  // Before step `step`'s rollout: policy v(step - 1), and the drafter when `drafter_version`
  // changed since the last publish, to the group's members (see the top). Adds to r's
  // publish_seconds and weight_sync_refused.
  Status publish(int64_t step, torch::nn::Module& policy, torch::nn::Module& drafter,
                 int64_t drafter_version, StepReport* r);

 private:
  // Opens generation sync_generation_ + 1 for `world` ranks; null when it cannot be opened.
  std::unique_ptr<WeightSync> open_generation(int world, int rendezvous_timeout_s);
  WeightSyncOptions sync_options(int world) const;
  // Every rollout worker and each drafter slot present, in order.
  std::vector<int> weight_holders() const;
  bool regroup();
  // Ends the current generation (closing rank 0's connections ends the members' part of a
  // broken publish at once) and removes a local group's store file; logged with `why`.
  void break_group(const std::string& why);
  void close_group();
  // Member w's answer to a publish: "" when it holds what was published, else why not. A
  // malformed answer restarts (or drops) the member; an error when the restart fails.
  StatusOr<std::string> collect_answer(int w, int64_t policy_version, StepReport* r);
  // The files of the versions member w now holds need not travel over its connection.
  void mark_held(int w, const WeightsAck& ack);
  // Where a local group meets: <run_dir>/weight-sync, made private (0700); "" when it cannot be.
  std::string store_dir();
  void log(const std::string& s) const {
    if (log_) log_(s);
  }
  int rollout_workers() const;

  const RLRunPlan& plan_;
  LogFn log_;
  WorkerPool* pool_ = nullptr;
  bool wanted_ = false;               // TLT_WEIGHT_SYNC=gloo|nccl, not let go
  bool cuda_ = false;                 // TLT_WEIGHT_SYNC=nccl
  bool file_only_ = false;            // TLT_WEIGHT_SYNC=file: no group
  std::string secret_;                // the job secret, once read
  std::unique_ptr<WeightSync> sync_;  // null: no generation now; the workers load files
  WeightSyncInvite invite_;           // the current generation's (rank 1's; rank i+1 for i)
  std::vector<int> members_;          // the workers of sync_: rank i + 1 for member i
  bool starting_ = false;
  bool lost_ = false;             // a worker was set up again: it is not in the group
  int64_t generation_ = 0;        // generations opened so far
  int failed_ = 0;                // generations in a row that did not form
  int64_t synced_drafter_ = -1;   // the drafter version last published
  int64_t drafter_version_ = -1;  // the newest drafter version published or asked for
};

}  // namespace tlt::rl
