// The group of trainer ranks of an RLJob (spec.roles.trainer.replicas = W > 1): rank 0 is the
// driver (runtime/rl/run.h: rollouts, scoring, the drafter, weight publishing, reports and
// checkpoints) and ranks 1..W-1 take their share of each policy update (runtime/rl/
// policy_trainer.h: data parallel, ZeRO-1). The group is runtime/tst/group.h's c10d set-up
// (Gloo on the CPU, NCCL on CUDA devices):
//
//   a local `tlt run`: rank 0 makes a file store in <dir>/rendezvous (0700) and starts ranks
//     1..W-1 as `tlt run-role` processes (TLT_ROLE=trainer, TLT_INDEX=r, TLT_RENDEZVOUS_FILE,
//     TLT_THREADS: runtime/tst/local_workers.h) with their stdout in <dir>/trainer-<r>.log;
//     they die with it. Gloo binds 127.0.0.1.
//   a cluster: trainer pod 0 hosts the store on TLT_TRAINER_GROUP_PORT, pod r connects to
//     <job>-trainer-0.<service> (api/trainer_group.h), its keys under a prefix derived from the
//     job secret.
//
// Rank 0 writes a setup message to the store (the policy's architecture, the device request,
// the update's options); a rank > 0 builds the policy and the reference from it, joins, takes
// rank 0's weights (PolicyTrainer::synchronise) and serves rank 0's commands until it finishes.
//
// Failures: a collective that waits on a rank past TrainerGroupOptions::timeout_s
// (TLT_COLLECTIVE_TIMEOUT_S, default 300 s), or whose rank's connection closed, fails rank 0's
// update, save or load; the run's error then holds kTrainerGroupFailed (trainer_group_failed)
// and, locally, names the rank processes that exited (exited()). `tlt run` then runs the job
// again from its last checkpoint with fresh rank processes (runtime/cli/rl_command.cc). A rank
// > 0 whose rank 0 is gone ends with Unavailable.
//
// Thread safety: one thread uses a TrainerRanks.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "runtime/rl/policy_setup.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/tst/group.h"
#include "runtime/tst/local_workers.h"

namespace tlt::rl {

// What a run's error holds when the trainer group failed (a rank died, hung or diverged).
inline constexpr const char* kTrainerGroupFailed = "the trainer group failed";
inline bool trainer_group_failed(const Status& s) {
  return !s.ok() && s.message().find(kTrainerGroupFailed) != std::string::npos;
}

struct TrainerGroupOptions {
  int rank = 0, world = 1;
  // Rank 0's address (ranks > 0 of a cluster connect to it); on rank 0, 127.0.0.1 or localhost
  // keeps Gloo on loopback, and any other name binds this host's address.
  std::string host = "127.0.0.1";
  int port = 0;                    // cluster: rank 0's store port
  std::string store_file;          // local: every rank meets at this file store
  std::string store_prefix;        // cluster: the keys' prefix (trainer_store_prefix)
  int rendezvous_timeout_s = 600;  // for every rank to arrive
  int timeout_s = 300;             // for one collective
  bool cuda = false;               // NCCL instead of Gloo
};

// The store prefix of a job's trainer group: derived from the job secret, so that a peer
// without it can neither read nor write the group's keys.
std::string trainer_store_prefix(const std::string& secret);

// The setup message rank 0 writes for the other ranks: the policy's architecture (preset and
// vocabulary, or the model card), spec.model.device, and spec.algorithm (api/encode.h) with the
// run's precision, from which each rank builds the update's options with grpo_options().
nlohmann::json trainer_setup(const RLRunPlan& plan, const PolicySetup& models);

class TrainerRanks {
 public:
  // Rank 0: opens the group (a local run, store_file empty and port 0: a file store under
  // `dir` and W-1 rank processes of job_file), writes `setup`, joins. Errors of opening and
  // joining (with a line per local rank that exited), of starting the processes.
  static StatusOr<std::unique_ptr<TrainerRanks>> start(const TrainerGroupOptions& options,
                                                       const std::string& job_file,
                                                       const std::string& dir,
                                                       const nlohmann::json& setup);
  ~TrainerRanks();
  TrainerRanks(const TrainerRanks&) = delete;
  TrainerRanks& operator=(const TrainerRanks&) = delete;

  tst::DataParallelGroup* group() const { return group_.get(); }
  // Local ranks whose process exited, one line each ("" when none or on a cluster).
  std::string exited();
  // Leaves the group and waits up to timeout_s for the local ranks: "" when each exited 0.
  std::string finish(int timeout_s);

 private:
  TrainerRanks() = default;
  std::unique_ptr<tst::DataParallelGroup> group_;
  tst::LocalWorkers ranks_;  // ranks 1..W-1 of a local run
};

// A rank > 0: opens the group at `options`, waits for rank 0's setup (its warm start may take
// long: no limit but rank 0's store going away), builds the models on its device, joins,
// takes rank 0's weights and serves. Ok once rank 0 finishes; lines on `log`.
Status serve_trainer_rank(const TrainerGroupOptions& options, std::ostream& log);

}  // namespace tlt::rl
