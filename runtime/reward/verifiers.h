// The built-in reward verifiers: a response and a reference answer in, 1.0 or 0.0 out.
//
// A response's final answer is final_answer's (final_answer.h: the last \boxed{}, else the text
// after the last "####", "answer is" or "answer:"), the rule the generated tasks read too.
//
//   exact    the response's final answer (else the whole response) equals the reference after
//            normalize_text (trim, collapse spaces, fold ASCII case, strip trailing periods).
//   numeric  the response's final answer read as a number (parse_number; else the last number
//            in that answer), else the last number in the response, equals the reference's
//            number within the tolerances (numbers_equal). A reference that is not a number is
//            InvalidArgument.
//   math     the final answer, else the last math segment ($...$, \(...\), \[...\]), else the
//            last number in the response, compared after normalize_latex: as numbers when both
//            sides read as one (a literal, a fraction or a constant expression such as sqrt(2)/2),
//            else as strings; an equation's left side is dropped first (`x = 5` -> `5`); a
//            percentage also matches its hundredth (`75%` equals 0.75).
//   regex    `pattern` (ECMAScript) is searched for in the response; without a capture group a
//            match scores 1 (the answer is not consulted); with one, group 1 of the first match
//            must equal the reference after normalize_text.
// The reference is any JSON value the dataset holds: a string or a number, or a list of them
// meaning any of them is correct. See docs/rewards.md for the rules and their agreement with
// math-verify.
//
// Errors (never exceptions): options.validate()'s InvalidArgument naming
// `spec.reward.<field>`; InvalidArgument naming `answer` for a reference that is null, a
// bool, an object, an empty or nested list, or (numeric) not a number. A malformed response
// (empty, non-UTF-8, no number in it) is not an error: it scores 0.
//
// Thread safety: pure functions; concurrent calls are safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/spec.h"
#include "api/status.h"

namespace tlt::reward {

enum class VerifierType { kExact, kNumeric, kMath, kRegex };

// "exact", "numeric", "math", "regex".
const char* verifier_type_name(VerifierType type);
// The type named `name`; InvalidArgument naming spec.reward.type for any other name.
StatusOr<VerifierType> verifier_type_from_name(std::string_view name);

struct VerifierOptions {
  VerifierType type = VerifierType::kMath;
  // numeric and math: |a - b| <= max(absoluteTolerance, relativeTolerance * max(|a|, |b|)).
  // Integer literals are compared exactly whatever the tolerances.
  double relative_tolerance = 1e-6;  // spec.reward.relativeTolerance, in [0, 1)
  double absolute_tolerance = 0.0;   // spec.reward.absoluteTolerance, >= 0
  // regex: an ECMAScript pattern, searched for in the response (required for regex, unused
  // otherwise). E.g. "Answer: (\\w+)" scores group 1 against the reference.
  std::string pattern;  // spec.reward.pattern

  // OK, or InvalidArgument naming the first bad field: a tolerance that is negative, not
  // finite, or (relative) >= 1; a regex type without a pattern; a pattern that does not compile.
  Status validate() const;
};

// The one dispatch of spec.reward.type for everything that scores in the trainer (the scorer's
// verifier source, a dataset task's reward): the built-in verifier it names, type "" read as math
// (a dataset's default; a generated task's own reward is the scorer's to choose before asking),
// options validated; nullopt for a source outside the trainer (command, http). InvalidArgument
// naming spec.reward.<field> for an unknown type or a bad option.
StatusOr<std::optional<VerifierOptions>> verifier_options(const api::RewardSpec& spec);

// 1.0 when `response` answers `answer` correctly under `options`, else 0.0. Errors as above.
StatusOr<double> score(const VerifierOptions& options, std::string_view response,
                       const nlohmann::json& answer);

}  // namespace tlt::reward
