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
// never throws. The final answer is the one the verifiers read (final_answer below: the last
// \boxed{}, else the text after the last "Answer:"-style marker). With TaskOptions::free_text, a
// response that marks no answer is read by a free-text rule instead: arithmetic-cot takes the
// response's last number (last_number, the GSM8K-style lenient reading), countdown the expression
// before the response's last "=" (expression_before_last_equals: an expression is needed, since
// the numbers used are checked). A marked answer, when present, always wins, even when it does
// not parse (that response scores 0).
//
// Training and held-out problems come from disjoint streams of the same seed. Every problem
// carries a worked solution (used for the supervised warm start) that scores 1.
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
#include "runtime/reward/final_answer.h"
#include "runtime/rl/text.h"

namespace tlt::rl {

struct Problem {
  std::string prompt;    // what the policy reads
  std::string solution;  // a correct response, chain of thought included
  std::string answer;    // the final answer alone
  // A dataset row's (spec.task.dataset) identity and reference; empty for a generated problem.
  std::string id;              // stable across runs: which file and row
  std::string reference_json;  // the row's answerField value as JSON text (any JSON value)
  std::string messages_json;   // a prompt given as chat messages: the list as JSON text
  // The row's spec.reward.fields for a command or http reward, as a JSON object's text
  // (reward::ScoreRequest::fields_json); empty when none are asked for.
  std::string fields_json = {};
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
  // How many distinct held-out problems there are: a generated task's stream is endless; a
  // dataset's held-out rows are counted. Evaluation reads at most this many.
  virtual int64_t held_out_count() const { return INT64_MAX; }
  // The ids the policy reads for `p` (prompt_ids below). The default: codec.encode_prompt(
  // p.prompt, chat_prompt(p)) (the chat template's rendering when the codec has one, else the
  // plain prompt). A task whose prompts are chat messages renders them (Codec::encode_messages).
  virtual StatusOr<std::vector<int64_t>> encode(const Codec& codec, const Problem& p) const {
    return codec.encode_prompt(p.prompt, codec.has_chat() ? chat_prompt(p) : std::string());
  }
};

// The ids the policy reads for `p`: task.encode(codec, p). Errors as Codec::encode_prompt.
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

struct TaskOptions {
  // Read a response without an answer marker by the task's free-text rule (see the top of this
  // file). false: such a response scores 0 (the presets' rule, which their tests pin).
  bool free_text = false;
};

// "arithmetic-cot" or "countdown"; NotFound for another name.
StatusOr<std::unique_ptr<Task>> make_task(const std::string& name, uint64_t seed,
                                          const TaskOptions& options = {});

// The final answer the tasks read: reward::final_answer (runtime/reward/final_answer.h, the rule
// the built-in verifiers read too), "" when the response marks none. Never throws.
//   "Answer: 14" -> "14"; "The answer is 42." -> "42"; "Answer: **42**" -> "42";
//   "so \boxed{(1 + 2) * 3}." -> "(1 + 2) * 3"; "The answer is 42 apples" -> "42 apples" (which
//   the rewards then score 0).
inline std::string final_answer(const std::string& response) {
  return reward::final_answer(response).value_or("");
}

// The last number of a free-text response: a maximal run of digits with a '-' sign when the '-'
// directly precedes the digits and does not follow a digit, a letter or ')' ("7-5" reads 5, "= -3"
// reads -3), and with its decimal part when a '.' and a digit follow ("1.5" reads "1.5", which an
// integer answer then scores 0; "= 12." reads "12"). A thousands separator is not read ("1,234"
// reads 234). "" when the response has no digit. Never throws.
//   "7 + 5 = 12. 12 * 2 = 24." -> "24"; "so x = -3" -> "-3"; "no digits" -> "".
std::string last_number(const std::string& response);

// `solution` with the marker of its final answer ("Answer: ", the tasks' solutions' form) removed,
// the answer kept: what a worked solution that does not mark its answer looks like. The marker
// rule (final_answer) then finds no answer in it. Unchanged when there is no "Answer: ".
//   "3 + 4 = 7. Answer: 7" -> "3 + 4 = 7. 7"; "Answer: (1 + 2) * 3" -> "(1 + 2) * 3".
std::string unmark_final_answer(const std::string& solution);

// The expression a free-text response ends its work with: the text before its last '=', back to
// the first character that cannot be part of an expression (anything but digits, blanks and
// + - * / ( )), blanks trimmed. "" when there is no '=' or nothing of the kind precedes it.
//   "So (25 - 3) * 7 = 154." -> "(25 - 3) * 7"; "25 - 3 = 22. 22 * 7 = 154" -> "22 * 7".
std::string expression_before_last_equals(const std::string& response);

}  // namespace tlt::rl
