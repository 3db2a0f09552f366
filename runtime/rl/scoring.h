// How an RL run scores its responses (spec.reward) through runtime/reward/scorer.h: the scorer of
// a run's plan, the request of one response, and the switch that makes scoring serial.
//
// Overlap: the rollout phase submits each response as soon as it finishes (workers stream them,
// runtime/rl/rollout_phase.h), while the tail still generates; the policy update waits for the
// batch. With TLT_REWARD_SERIAL=1 in the environment nothing is submitted
// during the rollout and the update scores the whole batch itself (the A/B of
// bench/reward_overlap.sh). Rewards are identical either way: a response's request depends only
// on (step, request id, problem, response).
//
// Thread safety: functions; the scorer's own contract applies to what they return.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "api/status.h"
#include "runtime/reward/scorer.h"
#include "runtime/rl/plan.h"
#include "runtime/rl/tasks.h"

namespace tlt::rl {

// The scorer of plan.reward: `task`'s own reward for type "" on a generated task (the task is
// borrowed and must outlive the scorer), math for type "" on a dataset (plan.task.has_dataset()),
// a built-in verifier, the user's program (through the FIFOs of TLT_REWARD_PIPE_DIR when that is
// set) or an HTTP endpoint. make_scorer's errors.
StatusOr<std::unique_ptr<reward::Scorer>> make_run_scorer(const RLRunPlan& plan, const Task& task);

// The request of `response` to problem `p`: its reference is the dataset row's answer
// (p.reference_json) or, for a generated problem, p.answer as a JSON string.
reward::ScoreRequest score_request(const Problem& p, std::string id, std::string response);

// The wire id of request `index` of RL step `step` ("s3-17"), and of held-out problem
// `problem`'s sample `sample` ("heldout-12-3"): unique within their batch.
std::string step_request_id(int64_t step, int64_t index);
std::string held_out_request_id(int64_t problem, int64_t sample);

// TLT_REWARD_SERIAL=1: score after the rollout, not during it.
bool serial_scoring();

}  // namespace tlt::rl
