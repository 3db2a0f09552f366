// Held-out evaluation of an RL policy.
//
// A policy is scored on the first n held-out problems of its task, `samples` responses each,
// sampled through the rollout engine (plain decoding) with per-response seeds fixed by (seed,
// problem, sample). Two policies evaluated with the same (n, samples, seed) therefore meet the
// same problems with the same random numbers, and the comparison is paired by problem
// (runtime/rl/paired.h).
//
// Thread safety: functions; the model must not be used by other threads meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/status.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"
#include "runtime/rollout/engine.h"

namespace tlt::rl {

struct HeldOutResult {
  double reward = 0.0;       // mean reward over all responses
  double mean_tokens = 0.0;  // mean response length
  double marked = 0.0;       // share of responses with a final-answer marker (final_answer)
  int64_t problems = 0;
  int64_t samples = 0;              // responses per problem
  std::vector<double> per_problem;  // (problems,): each problem's mean reward
  // What was scored (an RL run's samples.jsonl, runtime/rl/samples.h): response j answers
  // evaluated[j / samples] (j = problem x samples + sample).
  std::vector<Problem> evaluated;                  // (problems,)
  std::vector<std::vector<int64_t>> prompt_ids;    // (problems x samples,): the prompt read
  std::vector<std::vector<int64_t>> response_ids;  // (problems x samples,): end token included
  std::vector<double> rewards;                     // (problems x samples,)
};

// The rewards of a batch of held-out responses: texts[j] answers problems[j / samples] (its
// sample j % samples); the rewards by j, or an error (an RL run's scorer: runtime/rl/scoring.h).
using HeldOutRewards = std::function<StatusOr<std::vector<double>>(
    const std::vector<Problem>& problems, int64_t samples, const std::vector<std::string>& texts)>;

// `samples` responses to each of the first `n` held-out problems, sampled at `temperature` (0:
// greedy, one sample) with seeds fixed by `seed`. Prompts and responses go through `codec`
// (borrowed; nullptr: the ASCII codec of the presets). Rewards come from `rewards` (empty: the
// task's own reward). Internal when generation fails; the codec's and the rewards' errors.
StatusOr<HeldOutResult> evaluate_held_out(model::Transformer policy, const Task& task, int64_t n,
                                          int32_t max_tokens, double temperature = 0.0,
                                          int64_t samples = 1, uint64_t seed = 0,
                                          const Codec* codec = nullptr,
                                          const HeldOutRewards& rewards = {});

// Makes `r` stop on any of the codec's end ids (stop_token and more_stop_tokens).
void set_stop_tokens(const Codec& codec, rollout::Request* r);

}  // namespace tlt::rl
