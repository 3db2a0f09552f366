// The built-in reward verifiers (runtime/reward/verifiers.h): each rule's positive and negative
// cases, the edge cases of number reading, the errors, and the one dispatch of spec.reward.type
// (verifier_options). The final answer's own rule: final_answer_test.cc.
#include <gtest/gtest.h>

#include <string>

#include "runtime/reward/answer_text.h"
#include "runtime/reward/verifiers.h"

namespace tlt::reward {
namespace {

using nlohmann::json;

double run(VerifierType type, std::string_view response, const json& answer,
           const std::string& pattern = "") {
  VerifierOptions options;
  options.type = type;
  options.pattern = pattern;
  auto scored = score(options, response, answer);
  EXPECT_TRUE(scored.ok()) << scored.status().to_string();
  return scored.ok() ? *scored : -1;
}

double math(std::string_view response, const json& answer) {
  return run(VerifierType::kMath, response, answer);
}
double numeric(std::string_view response, const json& answer) {
  return run(VerifierType::kNumeric, response, answer);
}
double exact(std::string_view response, const json& answer) {
  return run(VerifierType::kExact, response, answer);
}

TEST(AnswerText, FindsTheLastMathSegment) {
  EXPECT_EQ(last_math_segment("so $x$ and then $-\\frac{3}{4}$."), "-\\frac{3}{4}");
  EXPECT_EQ(last_math_segment("\\[ 36 \\] and $$7$$"), "7");
  EXPECT_EQ(last_math_segment("paid $5 and got $3 back"), std::nullopt);  // currency, not math
  EXPECT_EQ(last_math_segment("$ $"), std::nullopt);
}

TEST(AnswerText, NormalizesText) {
  EXPECT_EQ(normalize_text("  The \t Cat\n sat.. "), "the cat sat");
  EXPECT_EQ(normalize_text(""), "");
}

TEST(AnswerText, NormalizesLatex) {
  EXPECT_EQ(normalize_latex("\\left( \\dfrac{1}{2} \\right)"), "(1/2)");
  EXPECT_EQ(normalize_latex("\\frac12"), "1/2");
  EXPECT_EQ(normalize_latex("\\tfrac{\\sqrt{2}}{2}"), "(sqrt(2))/2");
  EXPECT_EQ(normalize_latex("$x^{2} + 1$."), "x^2+1");
  EXPECT_EQ(normalize_latex("12\\text{ cm}"), "12cm");
  EXPECT_EQ(normalize_latex("1{,}000\\!"), "1,000");
  EXPECT_EQ(normalize_latex("\\leftarrow"), "\\leftarrow");
  EXPECT_EQ(normalize_latex("90^\\circ"), "90");
  EXPECT_EQ(normalize_latex("2\\frac{1}{2}"), "(2+1/2)");
  EXPECT_EQ(normalize_latex("\\$18 \\{24\\}"), "1824");
}

TEST(AnswerText, ParsesNumbers) {
  EXPECT_DOUBLE_EQ(parse_number("1,234.5")->value, 1234.5);
  EXPECT_DOUBLE_EQ(parse_number("-3/4")->value, -0.75);
  EXPECT_DOUBLE_EQ(parse_number("50%")->value, 50);
  EXPECT_DOUBLE_EQ(parse_number("12 cm")->value, 12);
  EXPECT_DOUBLE_EQ(parse_number("$5.")->value, 5);
  EXPECT_EQ(parse_number("007")->integer, "7");
  EXPECT_EQ(parse_number("1,23"), std::nullopt);  // not a thousands group
  EXPECT_EQ(parse_number("x + 1"), std::nullopt);
  EXPECT_EQ(parse_number("1/0"), std::nullopt);
  EXPECT_EQ(parse_number(""), std::nullopt);
}

TEST(AnswerText, FindsTheLastNumber) {
  EXPECT_DOUBLE_EQ(last_number("from 1,000 to -2.5 then 3/4.")->value, 0.75);
  EXPECT_DOUBLE_EQ(last_number("x = -3, so")->value, -3);
  EXPECT_DOUBLE_EQ(last_number("10-2")->value, 2);
  EXPECT_EQ(last_number("abc3 none"), std::nullopt);
  EXPECT_EQ(last_number(""), std::nullopt);
}

TEST(AnswerText, EvaluatesConstantExpressions) {
  EXPECT_NEAR(*evaluate_expression("(sqrt(2))/2"), 0.70710678, 1e-8);
  EXPECT_NEAR(*evaluate_expression("2sqrt(3)"), 3.46410161, 1e-8);
  EXPECT_NEAR(*evaluate_expression("-2^2+3pi"), -4 + 3 * M_PI, 1e-12);
  EXPECT_EQ(evaluate_expression("x+1"), std::nullopt);
  EXPECT_EQ(evaluate_expression("1/(1-1)"), std::nullopt);
  EXPECT_EQ(evaluate_expression(std::string(10000, '(') + "1"), std::nullopt);  // depth bound
}

TEST(Exact, ComparesNormalisedFinalAnswers) {
  EXPECT_EQ(exact("  Paris. ", "paris"), 1.0);
  EXPECT_EQ(exact("I think.\nThe answer is New   York.", "new york"), 1.0);
  EXPECT_EQ(exact("London", "Paris"), 0.0);
  EXPECT_EQ(exact("", "Paris"), 0.0);
  EXPECT_EQ(exact("B", json::array({"a", "b"})), 1.0);
  EXPECT_EQ(exact("42", 42), 1.0);
}

TEST(Numeric, ReadsTheFormsAnswersTake) {
  EXPECT_EQ(numeric("#### 1,234", 1234), 1.0);
  EXPECT_EQ(numeric("The answer is 12 cm.", "12"), 1.0);
  EXPECT_EQ(numeric("about 50%", "50"), 1.0);
  EXPECT_EQ(numeric("\\boxed{-3/4}", -0.75), 1.0);
  EXPECT_EQ(numeric("we get 1,234.5 in the end", "1234.5"), 1.0);
  EXPECT_EQ(numeric("0.33333", "1/3"), 0.0);  // outside 1e-6 relative
  EXPECT_EQ(numeric("0.3333333", "1/3"), 1.0);
  EXPECT_EQ(numeric("41", 42), 0.0);
  EXPECT_EQ(numeric("no number", 42), 0.0);
  EXPECT_EQ(numeric("", 42), 0.0);
}

TEST(Numeric, ComparesHugeIntegersExactly) {
  EXPECT_EQ(numeric("123456789012345678901234567890", "123456789012345678901234567890"), 1.0);
  EXPECT_EQ(numeric("123456789012345678901234567891", "123456789012345678901234567890"), 0.0);
  EXPECT_EQ(numeric(std::string(400, '9'), std::string(400, '9')), 1.0);  // beyond a double
}

TEST(Numeric, HonoursTheTolerances) {
  VerifierOptions options;
  options.type = VerifierType::kNumeric;
  options.absolute_tolerance = 0.01;
  EXPECT_EQ(*score(options, "3.145", "3.14"), 1.0);
  EXPECT_EQ(*score(options, "3.16", "3.14"), 0.0);
}

TEST(Math, ReadsBoxesMarkersAndLatex) {
  EXPECT_EQ(math("so \\boxed{\\dfrac{1}{2}}", "0.5"), 1.0);
  EXPECT_EQ(math("$\\boxed{\\frac12}$", "\\frac{1}{2}"), 1.0);
  EXPECT_EQ(math("\\boxed{\\left(\\frac{3}{4}\\right)}", "3/4"), 1.0);
  EXPECT_EQ(math("#### 72", 72), 1.0);
  EXPECT_EQ(math("The answer is $-\\frac{3}{4}$.", "-0.75"), 1.0);
  EXPECT_EQ(math("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}"), 1.0);
  EXPECT_EQ(math("\\boxed{x = 5}", "5"), 1.0);
  EXPECT_EQ(math("\\boxed{12\\text{ cm}}", "12"), 1.0);
  EXPECT_EQ(math("\\boxed{50\\%}", "50"), 1.0);
  EXPECT_EQ(math("\\boxed{x^{2}+1}", "x^2 + 1"), 1.0);
  EXPECT_EQ(math("First 3, then 4, finally 18", 18), 1.0);        // no marker: the last number
  EXPECT_EQ(math("The slope is $-\\frac{3}{4}$.", "-3/4"), 1.0);  // else the last math
  EXPECT_EQ(math("\\boxed{75\\%}", "\\frac{3}{4}"), 1.0);         // a percentage, either way
  EXPECT_EQ(math("\\boxed{3\\frac{1}{2}}", "3.5"), 1.0);
  EXPECT_EQ(math("\\boxed{\\frac{4\\pi}{2}}", "2\\pi"), 1.0);
  EXPECT_EQ(math("**Answer:** 24", 24), 1.0);
}

TEST(Math, RejectsWrongAnswers) {
  EXPECT_EQ(math("\\boxed{\\frac{1}{3}}", "0.5"), 0.0);
  EXPECT_EQ(math("\\boxed{18} but maybe 19", 19), 0.0);  // the box wins
  EXPECT_EQ(math("", 1), 0.0);
  EXPECT_EQ(math("\\boxed{}", 1), 0.0);
  EXPECT_EQ(math("\\boxed{x+2}", "x+1"), 0.0);
}

TEST(Regex, MatchesOrComparesGroupOne) {
  EXPECT_EQ(run(VerifierType::kRegex, "<answer>yes</answer>", nullptr, "<answer>.*</answer>"), 1.0);
  EXPECT_EQ(run(VerifierType::kRegex, "yes", nullptr, "^no$"), 0.0);
  EXPECT_EQ(run(VerifierType::kRegex, "Answer: Blue", "blue", "Answer: (\\w+)"), 1.0);
  EXPECT_EQ(run(VerifierType::kRegex, "Answer: Red", "blue", "Answer: (\\w+)"), 0.0);
}

TEST(Errors, NameTheField) {
  VerifierOptions options;
  options.type = VerifierType::kRegex;
  options.pattern = "(unclosed";
  auto scored = score(options, "x", "x");
  ASSERT_FALSE(scored.ok());
  EXPECT_EQ(scored.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(scored.status().message().find("spec.reward.pattern"), std::string::npos);
  options.pattern = "";
  EXPECT_NE(options.validate().message().find("spec.reward.pattern"), std::string::npos);
  options = VerifierOptions{};
  options.relative_tolerance = -1;
  EXPECT_NE(options.validate().message().find("spec.reward.relativeTolerance"), std::string::npos);
  EXPECT_NE(verifier_type_from_name("fuzzy").status().message().find("spec.reward.type"),
            std::string::npos);
  EXPECT_EQ(*verifier_type_from_name("numeric"), VerifierType::kNumeric);
}

// One dispatch of spec.reward.type for what scores in the trainer: the scorer and a dataset task.
TEST(VerifierOptions, DispatchTheRewardType) {
  api::RewardSpec spec;
  auto math_default = verifier_options(spec);  // unset: math (a dataset's default)
  ASSERT_TRUE(math_default.ok() && math_default->has_value());
  EXPECT_EQ((*math_default)->type, VerifierType::kMath);
  spec.type = "numeric";
  spec.absolute_tolerance = 0.5;
  auto numeric_options = verifier_options(spec);
  ASSERT_TRUE(numeric_options.ok() && numeric_options->has_value());
  EXPECT_EQ((*numeric_options)->type, VerifierType::kNumeric);
  EXPECT_EQ((*numeric_options)->absolute_tolerance, 0.5);
  for (const char* outside : {"command", "http"}) {
    spec.type = outside;
    auto none = verifier_options(spec);
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value()) << outside;
  }
  spec.type = "fuzzy";
  EXPECT_NE(verifier_options(spec).status().message().find("spec.reward.type"), std::string::npos);
  spec.type = "regex";  // without a pattern
  EXPECT_NE(verifier_options(spec).status().message().find("spec.reward.pattern"),
            std::string::npos);
}

// The verifiers read the final answer the generated tasks read (final_answer.h): a box wins.
TEST(Math, ReadsTheSharedFinalAnswer) {
  EXPECT_EQ(math("\\boxed{3} ... Answer: 4", 3), 1.0);
  EXPECT_EQ(math("\\boxed{3} ... Answer: 4", 4), 0.0);
  EXPECT_EQ(exact("The answer is *Paris*.", "paris"), 1.0);
  EXPECT_EQ(math("The answer is *42*.", 42), 1.0);
}

TEST(Errors, RefuseAnswersThatAreNotStringsOrNumbers) {
  VerifierOptions options;
  for (const json& bad : {json(nullptr), json(true), json::object(), json::array(),
                          json::array({json::array({1})})}) {
    auto scored = score(options, "1", bad);
    ASSERT_FALSE(scored.ok()) << bad.dump();
    EXPECT_NE(scored.status().message().find("answer"), std::string::npos);
  }
  options.type = VerifierType::kNumeric;
  EXPECT_FALSE(score(options, "1", "banana").ok());
}

TEST(Errors, MalformedResponsesScoreZero) {
  const std::string bytes = std::string("\xff\xfe\x80 \\boxed{\xc3(") + '\0' + "}";
  for (VerifierType type : {VerifierType::kExact, VerifierType::kNumeric, VerifierType::kMath}) {
    EXPECT_EQ(run(type, bytes, 1), 0.0);
  }
  EXPECT_EQ(run(VerifierType::kRegex, bytes, 1, "(\\d)"), 0.0);
  EXPECT_EQ(math(std::string(100000, '{') + "\\boxed{" + std::string(100000, '{'), 1), 0.0);
}

}  // namespace
}  // namespace tlt::reward
