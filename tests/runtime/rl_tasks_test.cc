// Task generators and reward checkers: deterministic, disjoint held-out stream, heavy-tailed
// arithmetic lengths, worked solutions score 1, wrong or malformed answers score 0 safely.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "runtime/rl/tasks.h"

namespace tlt::rl {
namespace {

std::unique_ptr<Task> task(const std::string& name, uint64_t seed = 1) {
  auto t = make_task(name, seed);
  EXPECT_TRUE(t.ok());
  return std::move(*t);
}

TEST(Tasks, UnknownNameIsNotFound) {
  EXPECT_EQ(make_task("sudoku", 1).status().code(), StatusCode::kNotFound);
}

TEST(Tasks, FinalAnswerTakesTheLastOne) {
  EXPECT_EQ(final_answer("Answer: 3. wait. Answer: 12."), "12");
  EXPECT_EQ(final_answer("no answer here"), "");
  EXPECT_EQ(final_answer("Answer:  (1 + 2) * 3 \nmore text"), "(1 + 2) * 3");
}

// A real model's free text: other phrasings, markdown, LaTeX; a box wins, else the last marker
// (the verifiers' rule: runtime/reward/final_answer.h).
TEST(Tasks, FinalAnswerReadsFreeText) {
  EXPECT_EQ(final_answer("3 + 4 = 7, so the answer is 7."), "7");
  EXPECT_EQ(final_answer("The answer is: -12"), "-12");
  EXPECT_EQ(final_answer("**Answer:** 42"), "42");
  EXPECT_EQ(final_answer("Answer: **42**"), "42");
  EXPECT_EQ(final_answer("FINAL ANSWER: `42`."), "42");
  EXPECT_EQ(final_answer("Hence $\\boxed{(25 - 3) * 7}$."), "(25 - 3) * 7");
  EXPECT_EQ(final_answer("Answer: 1\nwait, no.\n#### 5"), "5");
  EXPECT_EQ(final_answer("The answer is 42 apples"), "42 apples");
  EXPECT_EQ(final_answer("\\boxed{42"), "");  // unclosed
  EXPECT_EQ(final_answer(""), "");
  EXPECT_EQ(final_answer("\\boxed{3} ... Answer: 4"), "3");  // what a dataset's verifier reads
}

// What a free-text rule reads, as (response, expected) pairs.
using Readings = std::vector<std::pair<std::string, std::string>>;

TEST(Tasks, LastNumberReadsSignsAndDecimals) {
  const Readings cases = {
      {"7 + 5 = 12. 12 * 2 = 24.", "24"},
      {"so x = -3", "-3"},
      {"7-5", "5"},  // a minus after a digit, a letter or ')' is an operator
      {"(3)-5", "5"},
      {"x-5", "5"},
      {"it is 1.5 now", "1.5"},
      {"-2.25", "-2.25"},
      {"= 12.", "12"},
      {"1,234", "234"},
      {"no digits", ""},
      {"", ""},
      {"-", ""},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(last_number(text), want) << text;
}

TEST(Tasks, ExpressionBeforeLastEquals) {
  const Readings cases = {
      {"So (25 - 3) * 7 = 154.", "(25 - 3) * 7"},
      {"25 - 3 = 22. 22 * 7 = 154", "22 * 7"},
      {"x = 3", ""},
      {"no equals sign 3 + 4", ""},
      {"= 5", ""},
      {std::string("1\0+ 2 = 3", 9), "+ 2"},  // a NUL byte is not part of an expression
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(expression_before_last_equals(text), want);
}

// Free text is read only when asked for (TaskOptions::free_text), and a marker always wins.
TEST(Tasks, FreeTextRuleIsOptInAndMarkersWin) {
  auto marker = task("arithmetic-cot", 3);
  auto free = make_task("arithmetic-cot", 3, TaskOptions{true});
  ASSERT_TRUE(free.ok());
  Problem p;
  p.prompt = "Compute left to right: 7 + 5 * 2\n";
  p.answer = "24";
  for (const char* text : {"7 + 5 = 12. 12 * 2 = 24.", "24", "The result is 24 (left to right)."}) {
    EXPECT_EQ(marker->reward(p, text), 0.0) << text;
    EXPECT_EQ((*free)->reward(p, text), 1.0) << text;
  }
  EXPECT_EQ((*free)->reward(p, "7 + 5 * 2 = 7 + 10 = 17."), 0.0) << "the usual precedence";
  EXPECT_EQ((*free)->reward(p, "12 * 2 = 24. Answer: 17"), 0.0) << "the marker wins";
  EXPECT_EQ((*free)->reward(p, "24. Answer: twenty-four"), 0.0) << "even one that does not parse";
  EXPECT_EQ((*free)->reward(p, "12 * 2 = 24.5"), 0.0) << "not an integer";

  auto count_marker = task("countdown", 3);
  auto count_free = make_task("countdown", 3, TaskOptions{true});
  ASSERT_TRUE(count_free.ok());
  p.prompt = "Numbers: 3 7 25 1. Target: 154. Use each number at most once.\n";
  p.answer = "154";
  const char* worked = "First 25 - 3 = 22, then times 7: (25 - 3) * 7 = 154.";
  EXPECT_EQ(count_marker->reward(p, worked), 0.0);
  EXPECT_EQ((*count_free)->reward(p, worked), 1.0);
  EXPECT_EQ((*count_free)->reward(p, "25 - 3 = 22. 22 * 7 = 154"), 0.0) << "22 was not given";
  EXPECT_EQ((*count_free)->reward(p, "(25 - 3) * 7 = 155"), 1.0) << "the left side is read";
  EXPECT_EQ((*count_free)->reward(p, "154"), 0.0) << "no expression";
}

TEST(Tasks, FreeTextRewardsAndMalformedTextScoresZero) {
  auto arith = task("arithmetic-cot", 3);
  Problem p = arith->problem(0, false);
  EXPECT_EQ(arith->reward(p, "Let me compute. The answer is " + p.answer + "."), 1.0);
  EXPECT_EQ(arith->reward(p, "Answer: **" + p.answer + "**"), 1.0);
  EXPECT_EQ(arith->reward(p, "The answer is " + p.answer + " apples"), 0.0);
  EXPECT_EQ(arith->reward(p, "Answer: **"), 0.0);
  EXPECT_EQ(arith->reward(p, "Answer: $$"), 0.0);
  EXPECT_EQ(arith->reward(p, "\\boxed{" + p.answer + "}. Check: Answer: 1" + p.answer), 1.0);
  // Random bytes, markers among them, never throw and score 0 or 1.
  std::mt19937 rng(5);
  const std::string pieces[] = {
      "Answer:", "answer is", "\\boxed{", "}", "{",   "**", "$", "`", ":",    ".",
      "\n",      "42",        "-",        "=", " + ", "7",  "(", ")", "\xff", std::string(1, '\0')};
  auto countdown = task("countdown", 3);
  auto arith_free = make_task("arithmetic-cot", 3, TaskOptions{true});
  auto countdown_free = make_task("countdown", 3, TaskOptions{true});
  Problem q = countdown->problem(0, false);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (int k = int(rng() % 8); k > 0; --k) text += pieces[rng() % std::size(pieces)];
    for (const auto* t : {arith.get(), countdown.get(), arith_free->get(), countdown_free->get()}) {
      bool is_arith = t == arith.get() || t == arith_free->get();
      double r = t->reward(is_arith ? p : q, text);
      EXPECT_TRUE(r == 0.0 || r == 1.0) << text;
    }
  }
}

class EveryTask : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryTask, DeterministicAndHeldOutIsDisjoint) {
  auto a = task(GetParam(), 7), b = task(GetParam(), 7), c = task(GetParam(), 8);
  EXPECT_EQ(a->problem(3, false).prompt, b->problem(3, false).prompt);
  int same_seed_differs = 0;
  std::set<std::string> train;
  for (uint64_t i = 0; i < 500; ++i) {
    train.insert(a->problem(i, false).prompt);
    same_seed_differs += a->problem(i, false).prompt != c->problem(i, false).prompt;
  }
  EXPECT_GT(same_seed_differs, 400);
  int overlap = 0;
  for (uint64_t i = 0; i < 200; ++i) overlap += train.count(a->problem(i, true).prompt);
  EXPECT_EQ(overlap, 0) << "no held-out prompt may appear in training, even a one-step one";
}

TEST_P(EveryTask, WorkedSolutionsScoreOneAndWrongAnswersZero) {
  auto t = task(GetParam());
  for (uint64_t i = 0; i < 300; ++i) {
    Problem p = t->problem(i, i % 2 == 0);
    EXPECT_EQ(t->reward(p, p.solution), 1.0) << p.prompt << p.solution;
    EXPECT_EQ(t->reward(p, "Answer: " + p.answer + "9999"), 0.0);
  }
}

// The warm start's unmarked solutions (spec.algorithm.warmStartUnmarkedAnswers) keep the answer
// but earn nothing under the marker rule, and are still correct under the free-text rule.
TEST_P(EveryTask, UnmarkedSolutionsScoreZeroUnderTheMarkerRule) {
  auto t = task(GetParam());
  for (uint64_t i = 0; i < 300; ++i) {
    Problem p = t->problem(i, false);
    std::string unmarked = unmark_final_answer(p.solution);
    EXPECT_EQ(unmarked.find("Answer:"), std::string::npos) << unmarked;
    EXPECT_EQ(unmarked.size() + std::string("Answer: ").size(), p.solution.size()) << unmarked;
    EXPECT_EQ(final_answer(unmarked), "") << unmarked;
    EXPECT_EQ(t->reward(p, unmarked), 0.0) << unmarked;
  }
}

TEST(Tasks, UnmarkFinalAnswerRemovesOnlyTheLastMarker) {
  EXPECT_EQ(unmark_final_answer("3 + 4 = 7. Answer: 7"), "3 + 4 = 7. 7");
  EXPECT_EQ(unmark_final_answer("Answer: (1 + 2) * 3"), "(1 + 2) * 3");
  EXPECT_EQ(unmark_final_answer("Answer: 1. Answer: 2"), "Answer: 1. 2");
  EXPECT_EQ(unmark_final_answer("no marker here"), "no marker here");
  EXPECT_EQ(unmark_final_answer(""), "");
}

TEST_P(EveryTask, MalformedResponsesScoreZeroWithoutThrowing) {
  auto t = task(GetParam());
  Problem p = t->problem(0, false);
  for (const char* bad :
       {"", "Answer:", "Answer: ((((", "Answer: 1/0", "Answer: 99999999999999999999999",
        "Answer: 3 +", "Answer: )(", "Answer: 1e5",
        "Answer: ((((((((((((((((((((((((((((((((((("
        "((((((1))))))))))))))))))))))))))))))))))))))",
        "Answer: 999999999 * 999999999 * 999999999 * 999999999", "\xff\xfe Answer: \x01"}) {
    EXPECT_EQ(t->reward(p, bad), 0.0) << bad;
  }
}

INSTANTIATE_TEST_SUITE_P(Tasks, EveryTask, ::testing::Values("arithmetic-cot", "countdown"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(ArithmeticCot, LengthsAreHeavyTailed) {
  auto t = task("arithmetic-cot");
  std::vector<size_t> len;
  for (uint64_t i = 0; i < 4000; ++i) len.push_back(t->problem(i, false).solution.size());
  std::sort(len.begin(), len.end());
  size_t p50 = len[len.size() / 2], p99 = len[len.size() * 99 / 100];
  EXPECT_GT(double(p99) / double(p50), 5.0) << "p50=" << p50 << " p99=" << p99;
}

TEST(Countdown, ChecksNumbersAreGivenAndUsedAtMostOnce) {
  auto t = task("countdown");
  Problem p;
  p.prompt = "Numbers: 3 7 25 1. Target: 176. Use each number at most once.\n";
  p.answer = "176";
  EXPECT_EQ(t->reward(p, "Answer: (25 - 3) * 7 + 1 + 21"), 0.0) << "21 was not given";
  EXPECT_EQ(t->reward(p, "Answer: (25 - 3) * 7 + 25 - 3"), 0.0) << "25 and 3 used twice";
  p.prompt = "Numbers: 3 7 25 1. Target: 155. Use each number at most once.\n";
  p.answer = "155";
  EXPECT_EQ(t->reward(p, "Answer: (25 - 3) * 7 + 1"), 1.0);
  EXPECT_EQ(t->reward(p, "Answer: (25 - 3) * 7 + 1 / 1"), 0.0) << "1 used twice";
  p.prompt = "Numbers: 6 4 3. Target: 2. Use each number at most once.\n";
  p.answer = "2";
  EXPECT_EQ(t->reward(p, "Answer: 6 / 3"), 1.0) << "exact division";
  EXPECT_EQ(t->reward(p, "Answer: 6 / 4 + 3"), 0.0) << "4.5 is not 2";
}

}  // namespace
}  // namespace tlt::rl
