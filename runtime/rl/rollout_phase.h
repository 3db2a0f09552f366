// The rollout phase of one RL step (steps 1-3 of runtime/rl/run.h's header): the step's
// prompts split over the generating workers, the workers' results, deaths and restarts, the
// drafter trainers started as workers are released and stopped when the last one is done, and
// the step's worker timeline and rollout figures in its StepReport.
//
// Between steps it keeps what carries over: each worker's bandit steps of the last step (passed
// on to the others when spec.speculative.selector.pooled), the rebalancer's assignment as last
// logged, and whether the fault injection (TLT_FAULT_KILL_WORKER=<step>: SIGKILL worker 0
// mid-step, once) has fired.
//
// Rewards: workers stream each response as it finishes (a `completed` message; the `generated`
// reply still carries them all) and it is submitted to the run's scorer (runtime/rl/scoring.h)
// at once, scored while the tail still generates; a response once submitted is final (a worker
// restarted mid-step regenerates it, and the first version is kept); run() opens
// the step's batch (one slot per request id) and the policy update waits for it. Nothing is
// submitted with serial scoring (TLT_REWARD_SERIAL=1) or without a scorer.
//
// Worker messages: each is decoded and checked against the step's state before it is used
// (runtime/rl/messages.h: the step, the policy version, request ids the worker was sent and has
// not answered, token ids and lengths, file names, statistics). A message that fails, an unknown
// op, or a reply the worker owes no longer (a second `generated`, a `trained` while it is not
// training) is refused: logged with the message's fault, the worker is treated as failed
// (killed and restarted, or a drafter pod dropped) and nothing of the message is used.
//
// Errors: Aborted when the stop flag is set mid-phase; the pool's errors (a remote worker that
// does not come back, a send that fails after restarts); Unavailable when a worker fails more
// than kMaxRestartsPerStep times in one step (died or refused), naming it and the last fault.
//
// Ownership: the plan, callbacks, pool, task and codec are the caller's and outlive this.
// Thread safety: one thread (the driver's).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "runtime/reward/scorer.h"
#include "runtime/rl/messages.h"
#include "runtime/rl/plan.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"
#include "runtime/rl/worker_pool.h"

namespace tlt::rl {

// One step's rollouts, as the policy update and the drafter merge take them.
struct Rollouts {
  std::vector<Problem> problems;
  std::vector<std::vector<int64_t>> prompts;    // one per problem
  std::vector<std::vector<int64_t>> responses;  // per request id (problem * G + k)
  // The drafter trainers' results: (checkpoint, optimizer steps), those with steps only.
  std::vector<std::pair<std::string, int64_t>> drafter_parts;
  double t0 = 0;  // runtime::now_s() when the step began
};

class RolloutPhase {
 public:
  static constexpr int kMaxRestartsPerStep = 3;

  RolloutPhase(const RLRunPlan& plan, const RunCallbacks& cb, const std::atomic<bool>* stop,
               WorkerPool& pool, const Task& task, const Codec& codec, int64_t max_seq,
               reward::Scorer* scorer = nullptr);
  ~RolloutPhase();

  // Runs step `step`'s rollout phase (opening its batch in the scorer) with policy version step - 1
  // and drafter version `drafter_version`; fills r's rollout fields (tokens, arms, phases, drafter
  // steps and loss, idle and reclaimed worker-seconds, restarts, drafter workers, timeline). Old
  // buffers (step - buffer_steps) are removed on the way out.
  StatusOr<Rollouts> run(int64_t step, int64_t drafter_version, StepReport* r);

 private:
  struct StepRun;
  // 1. The step's prompts and every worker's generate message.
  Status plan_step(StepRun& s, int64_t drafter_version);
  std::vector<bool> dedicated_workers(int64_t step, StepReport* r);
  // 1-2. Sends the requests; workers without any are released (and may train) at once.
  Status start_rollout(StepRun& s);
  // 2-3. Until every worker is done and every trainer stopped: results, deaths, training.
  Status run_rollout(StepRun& s);
  Status handle_worker(StepRun& s, int w, double t);
  // One message of worker w: decoded, checked (refused: an InvalidArgument), then applied.
  Status handle_message(StepRun& s, int w, const nlohmann::json& m, double t);
  Status worker_died(StepRun& s, int w, const Status& why, double t);
  // A message of worker w was refused (`why`): the worker is killed and handled as dead.
  Status refuse_worker(StepRun& s, int w, const Status& why, double t);
  Status on_generated(StepRun& s, int w, Generated g, double t);
  // One response streamed as it finished: kept and handed to the scorer.
  Status on_completed(StepRun& s, int w, Response c);
  // Hands request `id`'s response to the scorer (overlapped scoring), once.
  Status submit_for_reward(StepRun& s, size_t id);
  void on_trained(StepRun& s, int w, const Trained& tr, double t);
  // Counts a call of worker w that took `seconds`, of which its device measured the GPU busy
  // `device_share` (-1: not measured, the whole call counts).
  void add_busy(StepRun& s, int w, double device_share, double seconds);
  Status start_training(StepRun& s, const std::vector<int>& ws, double t);
  std::vector<std::string> buffers(const StepRun& s) const;
  void mark(StepRun& s, int w, const std::string& state, double t);
  // 3. Ends the phase: idle accounting, accept length, old buffers rotated out.
  Status finish_rollout(StepRun& s);
  bool stopping() const { return stop_ && stop_->load(); }
  void log(const std::string& s) const {
    if (cb_.log) cb_.log(s);
  }

  const RLRunPlan& plan_;
  const RunCallbacks& cb_;
  const std::atomic<bool>* stop_;
  WorkerPool& pool_;
  const Task& task_;
  const Codec& codec_;
  int64_t max_seq_;
  reward::Scorer* scorer_;  // nullptr, or the caller's: responses are submitted as they arrive
  bool killed_once_ = false;
  // Per worker: the bandit steps it measured in the last step, for the others (plan_step).
  std::vector<std::vector<BanditStep>> bandit_steps_;
  std::vector<int> last_drafter_workers_;  // as last logged
};

}  // namespace tlt::rl
