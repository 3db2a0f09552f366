// The final answer of a model's response: the one rule that the generated tasks
// (runtime/rl/tasks.h) and the built-in verifiers (verifiers.h) read. No LibTorch, no locale, no
// library beyond the standard one (the LibTorch core links it too): it works on bytes, folds ASCII
// only, takes any byte string (non-UTF-8 included) and never throws.
//
// The rule:
//   1. A box wins. When the response has a `\boxed{` (or `\fbox{`), the answer is the content of
//      the last one, braces balanced. A box that never closes (a response cut off inside it) marks
//      no answer.
//   2. Else the text after whichever of the markers "answer:", "answer is" or "####" (ASCII
//      case-insensitive) comes last, to the end of its line; when nothing is left on that line,
//      the next line ("The answer is:\n42").
//   3. Decoration removed: markdown emphasis ("**" and "__" anywhere, a run of '*' at either
//      end), a leading ':', a wrapping pair of '$' or '`', surrounding blanks and periods (a
//      period that starts a number, ".5", is kept).
//   An empty answer is no answer: nullopt.
//
// Why a box wins over a later marker ("\boxed{3} ... Answer: 4" reads 3): math RL prompts ask for
// the answer in \boxed{} (MATH, DeepSeek-R1, Qwen2.5-Math), and the graders math RL users know read
// a box before any other answer (verl's math rewards, Qwen2.5-Math's evaluation and lm-eval's
// minerva_math take the last box; math-verify gives boxes priority). A response often checks or
// restates its boxed answer in prose afterwards ("\boxed{18}. Checking: the answer is consistent
// with ..."), where reading the last marker would read the prose. Among markers without a box the
// last one wins, as GSM8K's "####" is read. The generated tasks ask for "Answer: <number>" and
// their policies write no box, so on their responses rules 2 and 3 read what a plain last-marker
// rule reads (tests/runtime/final_answer_test.cc compares the two on the tasks' response shapes),
// save three shapes read more leniently: an answer on the line after its marker, a '*' left at its
// end, and ".5", which is not read as "5".
//
// Examples:
//   final_answer("so \\boxed{\\frac{1}{2}}.")            -> "\\frac{1}{2}"
//   final_answer("\\boxed{3}. Check: Answer: 4")          -> "3"
//   final_answer("3 + 4 = 7. 7 * 2 = 14. Answer: 14.")    -> "14"
//   final_answer("...\n#### 1,234")                      -> "1,234"
//   final_answer("**Answer:** $42$")                     -> "42"
//   final_answer("The answer is 42 apples.")             -> "42 apples"
//   final_answer("\\boxed{42"), final_answer("Answer:"), final_answer("no marker 12") -> nullopt
//
// Thread safety: a pure function.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tlt::reward {

// The final answer of `response` under the rule above, or nullopt when it marks none.
std::optional<std::string> final_answer(std::string_view response);

}  // namespace tlt::reward
