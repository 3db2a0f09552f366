// The warm start of an RL policy (and of its drafter).
//
// RL from a random policy earns no reward, so GRPO has nothing to normalise. The warm start is
// supervised training on the task's worked solutions (prompt -> solution + end-of-text), loss on
// the solution tokens only, with AdamW. It is cached as a checkpoint keyed by everything that
// determines it, so every run of a job (and its baseline) starts from the same policy.
//
// Thread safety: functions; the model must not be used by other threads meanwhile.
#pragma once

#include <functional>
#include <string>

#include "api/status.h"
#include "runtime/model/drafter.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"

namespace tlt::rl {

struct WarmStartOptions {
  int64_t steps = 300;
  int64_t batch = 32;
  double learning_rate = 1e-3;
  uint64_t seed = 0;
  // Solutions are cut to this many tokens (end-of-text included), as rollouts are.
  int64_t max_response_tokens = 96;
  // Only problems whose prompt has at most this many characters are imitated: the warm start
  // teaches the format on the short head of the distribution; RL meets the long tail.
  int64_t max_prompt_chars = 64;
  // Share of the imitated solutions whose final answer is written without its marker
  // (unmark_final_answer), chosen per problem by unmarked_in_warm_start; 0: none. Under the marker
  // rule such a response earns nothing, so RL has to teach the policy to mark its answers: a
  // behaviour that reaches every problem, unlike the arithmetic facts RL sharpens one by one.
  double unmarked_answers = 0.0;
  // Rows are run in micro-batches of similar length of at most this many tokens (gradients
  // accumulated: the same step as one padded batch); <= 0: one padded batch.
  int64_t max_tokens_per_microbatch = 4096;
  // drafter_warm_start only: the drafting levels its loss unrolls (drafter::DrafterTrainer).
  int64_t drafter_levels = 1;
  // How prompts and solutions become ids (borrowed; must outlive the call); nullptr: the ASCII
  // codec of the presets.
  const Codec* codec = nullptr;
  // Problems whose prompt and cut solution exceed this many tokens are skipped (the policy's
  // context); 0: none are.
  int64_t max_seq = 0;
  // Asked before every micro-batch of the policy's warm start (unset: never): true stops it
  // there with Aborted (a cancel point for SIGTERM); nothing is cached then.
  std::function<bool()> cancelled;
};

// Whether the warm start imitates training problem `index` without its answer's marker: a hash of
// (seed, index) below `share`, so about share x N of N problems are, the same ones on every run.
bool unmarked_in_warm_start(uint64_t seed, uint64_t index, double share);

// Trains `policy` in place; `progress(step, loss)` is called after every step when set.
// Returns the mean loss of the last 10 steps, the codec's error, or Aborted when
// options.cancelled said so (the policy then partly trained).
StatusOr<double> supervised_warm_start(model::Transformer policy, const Task& task,
                                       const WarmStartOptions& options,
                                       const std::function<void(int64_t, double)>& progress = {});

// Loads the warm start from `path`, or trains it and saves it there. NotFound/Corruption/
// InvalidArgument from a bad file at `path` are returned, not papered over by retraining.
// Sets *trained to whether it trained now.
Status load_or_train_warm_start(model::Transformer policy, const Task& task,
                                const WarmStartOptions& options, const std::string& path,
                                bool* trained,
                                const std::function<void(int64_t, double)>& progress = {});

// The drafter's warm start: EAGLE-style training of `drafter` on `policy`'s own hidden states
// over the task's worked solutions (teacher forcing: one policy forward per batch, no
// generation), with the loss of drafter::DrafterTrainer on the solution tokens. The paper's
// drafter is trained before RL starts (acceptance 4.59 when static, 6.53 adapted; SEEDS.md
// section 1); without this, the first steps speculate with a random drafter and accept ~1 token.
// Unlike the policy's warm start, every prompt length is used (options.max_prompt_chars is
// ignored): the drafter meets the long tail's long chains. `policy` is only read. Returns the mean
// loss of the last 10 steps (or the codec's error); `progress(step, loss)` after every step.
StatusOr<double> drafter_warm_start(model::Transformer policy, model::Drafter drafter,
                                    const Task& task, const WarmStartOptions& options,
                                    const std::function<void(int64_t, double)>& progress = {});

// Loads the drafter's warm start from `path`, or trains it and saves it there; errors and
// *trained as load_or_train_warm_start.
Status load_or_train_drafter_warm_start(model::Transformer policy, model::Drafter drafter,
                                        const Task& task, const WarmStartOptions& options,
                                        const std::string& path, bool* trained,
                                        const std::function<void(int64_t, double)>& progress = {});

}  // namespace tlt::rl
