// Tasks with verifiable rewards for RLJob, generated from a seed.
//
//   arithmetic-cot  a chain of integer operations to evaluate left to right, answered with a
//                   written chain of thought ("3 + 4 = 7. 7 * 2 = 14. Answer: 14"). The number of
//                   operations is heavy-tailed (most problems need 1-3 steps, a few need 20+),
//                   which gives rollouts the long tail TLT exploits.
//   countdown       reach a target with given numbers, each used at most once, with + - * and
//                   exact division ("Answer: (25 - 3) * 7").
//
// Rewards are 1 for a correct final answer and 0 otherwise; a malformed response scores 0 and
// never throws. Training and held-out problems come from disjoint streams of the same seed.
// Every problem carries a worked solution (used for the supervised warm start) that scores 1.
//
// A chat model (a pretrained policy with a chat template) reads a problem as one user turn,
// chat_prompt(): the prompt plus a line that asks for the chain of thought and the "Answer:"
// line the reward reads; prompt_ids() picks the rendering the policy's codec calls for.
//
// Thread safety: tasks are immutable after construction; all methods are const.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "api/status.h"
#include "runtime/rl/text.h"

namespace tlt::rl {

struct Problem {
  std::string prompt;    // what the policy reads
  std::string solution;  // a correct response, chain of thought included
  std::string answer;    // the final answer alone
};

class Task {
 public:
  virtual ~Task() = default;
  // The i-th training (held_out = false) or held-out problem. Deterministic in (seed, i).
  virtual Problem problem(uint64_t i, bool held_out) const = 0;
  // 1.0 when the response's final answer (final_answer) is correct for `p`, else 0.0.
  virtual double reward(const Problem& p, const std::string& response) const = 0;
  // The user turn a chat model reads for `p`: its prompt and how to answer.
  virtual std::string chat_prompt(const Problem& p) const = 0;
};

// The ids the policy reads for `p`: codec.encode_prompt(p.prompt, task.chat_prompt(p)) (the chat
// template's rendering when the codec has one, else the plain prompt). Errors as encode_prompt.
StatusOr<std::vector<int64_t>> prompt_ids(const Codec& codec, const Task& task, const Problem& p);

struct FittedProblem {
  Problem problem;
  std::vector<int64_t> prompt;  // prompt_ids of `problem`
};

// Problem i of a stream with its prompt ids, or, when those are more than `max_prompt` tokens (a
// model of short context), the first of problems i + k * 2^40 (k = 1..99) that fits:
// deterministic in (seed, i, held_out), so a resumed run and the paired evaluations meet the same
// problems. FailedPrecondition naming max_prompt when none fits; the codec's errors.
StatusOr<FittedProblem> fitting_problem(const Task& task, const Codec& codec, uint64_t i,
                                        bool held_out, int64_t max_prompt);

// "arithmetic-cot" or "countdown"; NotFound for another name.
StatusOr<std::unique_ptr<Task>> make_task(const std::string& name, uint64_t seed);

// The final answer of a free-text response: the text after the last of the markers "Answer:",
// "answer is", "####" (to the line's end) or "\boxed{" (to its closing brace), matched without
// regard to case; markdown emphasis ("**42**"), a wrapping pair of '$' or '`', a leading ':' and
// surrounding blanks and periods removed. "" when there is no marker. Never throws.
//   "Answer: 14" -> "14"; "The answer is 42." -> "42"; "Answer: **42**" -> "42";
//   "so \boxed{(1 + 2) * 3}." -> "(1 + 2) * 3"; "The answer is 42 apples" -> "42 apples" (which
//   the rewards then score 0).
std::string final_answer(const std::string& response);

}  // namespace tlt::rl
