#include "runtime/reward/verifiers.h"

#include <cmath>
#include <optional>
#include <regex>
#include <vector>

#include "runtime/reward/answer_text.h"
#include "runtime/reward/final_answer.h"

namespace tlt::reward {
namespace {

constexpr const char* kField = "spec.reward.";

// The reference as one or more strings (a list is any-of). Numbers are written as JSON writes
// them (42, 2.5), so that every verifier reads one text form.
StatusOr<std::vector<std::string>> reference_texts(const nlohmann::json& answer) {
  auto one = [](const nlohmann::json& v) -> std::optional<std::string> {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return v.dump();
    return std::nullopt;
  };
  std::vector<std::string> texts;
  if (!answer.is_array()) {
    if (auto text = one(answer)) return std::vector<std::string>{*text};
  } else {
    for (const auto& item : answer) {
      auto text = one(item);
      if (!text) break;
      texts.push_back(*text);
    }
    if (!texts.empty() && texts.size() == answer.size()) return texts;
  }
  return Status::InvalidArgument(
      "answer: must be a string, a number or a non-empty list of them (got " +
      std::string(answer.type_name()) + ")");
}

// The right side of an equation's last `=` ("x=5" -> "5"); the text itself without one.
std::string drop_equation_lhs(const std::string& s) {
  size_t eq = s.rfind('=');
  return eq == std::string::npos ? s : s.substr(eq + 1);
}

// A LaTeX-normalised answer as a number: a literal or a constant expression.
// The expression's value wins over a literal with a unit ("2pi" is 2*pi, not 2 of unit "pi"),
// except where both read the same integer, kept exact however long.
std::optional<Number> math_number(const std::string& normalized) {
  std::optional<Number> literal = parse_number(normalized);
  std::optional<double> value = evaluate_expression(normalized);
  if (!value) return literal;
  Number evaluated{*value, std::nullopt};
  if (literal && literal->integer && numbers_equal(evaluated, *literal, 1e-12, 0)) return literal;
  return evaluated;
}

// Equal as numbers; a percentage on either side may also stand for its hundredth ("75%" = 0.75).
bool math_numbers_equal(const VerifierOptions& o, const std::string& a, const Number& na,
                        const std::string& b, const Number& nb) {
  auto eq = [&](const Number& x, const Number& y) {
    return numbers_equal(x, y, o.relative_tolerance, o.absolute_tolerance);
  };
  auto hundredth = [](const Number& x) { return Number{x.value / 100, std::nullopt}; };
  const bool pa = !a.empty() && a.back() == '%', pb = !b.empty() && b.back() == '%';
  return eq(na, nb) || (pa && eq(hundredth(na), nb)) || (pb && eq(na, hundredth(nb)));
}

bool math_equal(const VerifierOptions& o, const std::string& candidate, const std::string& ref) {
  std::string a = drop_equation_lhs(normalize_latex(candidate));
  std::string b = drop_equation_lhs(normalize_latex(ref));
  auto na = math_number(a), nb = math_number(b);
  if (na && nb) return math_numbers_equal(o, a, *na, b, *nb);
  return !a.empty() && a == b;
}

// The response's answer for `math`: its marked final answer, else its last math segment, else
// its last number.
std::optional<std::string> math_candidate(std::string_view response) {
  if (auto marked = final_answer(response)) return marked;
  if (auto math = last_math_segment(response)) return math;
  if (auto number = last_number(response)) {
    if (number->integer) return *number->integer;
    nlohmann::json value = number->value;
    return value.dump();
  }
  return std::nullopt;
}

// The response's number for `numeric` (see the header).
std::optional<Number> numeric_candidate(std::string_view response) {
  if (auto marked = final_answer(response)) {
    if (auto number = parse_number(*marked)) return number;
    if (auto number = math_number(normalize_latex(*marked))) return number;
    if (auto number = last_number(*marked)) return number;
  }
  return last_number(response);
}

StatusOr<double> score_regex(const VerifierOptions& o, std::string_view response,
                             const nlohmann::json& answer) {
  try {
    std::regex re(o.pattern, std::regex::ECMAScript);
    std::match_results<std::string_view::const_iterator> match;
    if (!std::regex_search(response.begin(), response.end(), match, re)) return 0.0;
    if (re.mark_count() == 0) return 1.0;
    auto refs = reference_texts(answer);
    if (!refs.ok()) return refs.status();
    const std::string got = normalize_text(match[1].str());
    for (const auto& ref : *refs) {
      if (normalize_text(ref) == got) return 1.0;
    }
    return 0.0;
  } catch (const std::regex_error& e) {
    // Compilation is checked by validate(); a search too complex for std::regex scores 0.
    return 0.0;
  }
}

}  // namespace

const char* verifier_type_name(VerifierType type) {
  switch (type) {
    case VerifierType::kExact:
      return "exact";
    case VerifierType::kNumeric:
      return "numeric";
    case VerifierType::kMath:
      return "math";
    case VerifierType::kRegex:
      return "regex";
  }
  return "unknown";
}

StatusOr<VerifierType> verifier_type_from_name(std::string_view name) {
  for (VerifierType t :
       {VerifierType::kExact, VerifierType::kNumeric, VerifierType::kMath, VerifierType::kRegex}) {
    if (name == verifier_type_name(t)) return t;
  }
  return Status::InvalidArgument(std::string(kField) + "type: must be exact, numeric, math or " +
                                 "regex (got \"" + std::string(name) + "\")");
}

StatusOr<std::optional<VerifierOptions>> verifier_options(const api::RewardSpec& spec) {
  if (spec.type == "command" || spec.type == "http") return std::optional<VerifierOptions>();
  StatusOr<VerifierType> type = verifier_type_from_name(spec.type.empty() ? "math" : spec.type);
  if (!type.ok()) return type.status();
  VerifierOptions o;
  o.type = *type;
  o.relative_tolerance = spec.relative_tolerance;
  o.absolute_tolerance = spec.absolute_tolerance;
  o.pattern = spec.pattern;
  TLT_RETURN_IF_ERROR(o.validate());
  return std::optional<VerifierOptions>(std::move(o));
}

Status VerifierOptions::validate() const {
  if (!std::isfinite(relative_tolerance) || relative_tolerance < 0 || relative_tolerance >= 1) {
    return Status::InvalidArgument(std::string(kField) +
                                   "relativeTolerance: must be in [0, 1) (got " +
                                   std::to_string(relative_tolerance) + ")");
  }
  if (!std::isfinite(absolute_tolerance) || absolute_tolerance < 0) {
    return Status::InvalidArgument(std::string(kField) + "absoluteTolerance: must be >= 0 (got " +
                                   std::to_string(absolute_tolerance) + ")");
  }
  if (type != VerifierType::kRegex) return Status::Ok();
  if (pattern.empty()) {
    return Status::InvalidArgument(std::string(kField) +
                                   "pattern: required when type is regex (an ECMAScript regex)");
  }
  try {
    std::regex re(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return Status::InvalidArgument(std::string(kField) + "pattern: not a valid ECMAScript regex (" +
                                   e.what() + "): " + pattern);
  }
  return Status::Ok();
}

StatusOr<double> score(const VerifierOptions& options, std::string_view response,
                       const nlohmann::json& answer) {
  TLT_RETURN_IF_ERROR(options.validate());
  if (options.type == VerifierType::kRegex) return score_regex(options, response, answer);
  auto refs = reference_texts(answer);
  if (!refs.ok()) return refs.status();
  if (options.type == VerifierType::kExact) {
    const std::string got = normalize_text(final_answer(response).value_or(std::string(response)));
    for (const auto& ref : *refs) {
      if (normalize_text(ref) == got) return 1.0;
    }
    return 0.0;
  }
  if (options.type == VerifierType::kNumeric) {
    std::optional<Number> got = numeric_candidate(response);
    for (const auto& ref : *refs) {
      auto want = parse_number(ref);
      if (!want) want = math_number(normalize_latex(ref));
      if (!want) return Status::InvalidArgument("answer: \"" + ref + "\" is not a number");
      if (got &&
          numbers_equal(*got, *want, options.relative_tolerance, options.absolute_tolerance)) {
        return 1.0;
      }
    }
    return 0.0;
  }
  std::optional<std::string> got = math_candidate(response);
  for (const auto& ref : *refs) {
    if (got && math_equal(options, *got, ref)) return 1.0;
  }
  return 0.0;
}

}  // namespace tlt::reward
