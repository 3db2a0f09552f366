// The one final-answer rule (runtime/reward/final_answer.h): a box wins, else the last marker;
// decoration; and, on the generated tasks' response shapes, the readings of the tasks' own rule
// before it was merged (commit 141433c, copied below as the reference), save the three lenient
// shapes the header names.
#include <gtest/gtest.h>

#include <cctype>
#include <random>
#include <string>
#include <vector>

#include "runtime/reward/final_answer.h"

namespace tlt::reward {
namespace {

std::string read(std::string_view response) {
  return final_answer(response).value_or("<none>");
}

TEST(FinalAnswer, ABoxWinsOverALaterMarker) {
  EXPECT_EQ(read("\\boxed{3} ... Answer: 4"), "3");
  EXPECT_EQ(read("Answer: 4. So \\boxed{3}."), "3");
  EXPECT_EQ(read("\\boxed{18}\n\nActually let me double check: the answer is consistent."), "18");
  EXPECT_EQ(read("\\boxed{1} then \\boxed{\\frac{1}{\\sqrt{2}}}."), "\\frac{1}{\\sqrt{2}}");
  EXPECT_EQ(read("\\fbox{7}"), "7");
  EXPECT_EQ(read("Hence $\\boxed{(25 - 3) * 7}$."), "(25 - 3) * 7");
  EXPECT_EQ(read("\\boxed{**42**}"), "42");
}

TEST(FinalAnswer, AnUnclosedOrEmptyBoxMarksNone) {
  EXPECT_EQ(read("\\boxed{\\frac{1"), "<none>");     // cut off inside the box
  EXPECT_EQ(read("Answer: 4 \\boxed{5"), "<none>");  // the last box decides
  EXPECT_EQ(read("\\boxed{}"), "<none>");
  EXPECT_EQ(read("\\boxed{ . }"), "<none>");
}

TEST(FinalAnswer, TheLastMarkerWinsWithoutABox) {
  EXPECT_EQ(read("Answer: 3. wait. Answer: 12."), "12");
  EXPECT_EQ(read("Answer: 1\nwait, no.\n#### 5"), "5");
  EXPECT_EQ(read("so\n#### 1,234\n"), "1,234");
  EXPECT_EQ(read("3 + 4 = 7, so the answer is 7."), "7");
  EXPECT_EQ(read("The Answer Is: -12"), "-12");
  EXPECT_EQ(read("Answer:  (1 + 2) * 3 \nmore text"), "(1 + 2) * 3");
  EXPECT_EQ(read("The answer is 42 apples."), "42 apples");
  EXPECT_EQ(read("no marker 12"), "<none>");
  EXPECT_EQ(read(""), "<none>");
  EXPECT_EQ(read("Answer:"), "<none>");
  EXPECT_EQ(read("Answer: .\n"), "<none>");
}

TEST(FinalAnswer, AnEmptyMarkerLineReadsTheNextLine) {
  EXPECT_EQ(read("The answer is:\n7"), "7");
  EXPECT_EQ(read("**Answer:**\n**42**\nmore"), "42");
  EXPECT_EQ(read("The answer is:\n\n7"), "<none>");  // only the next line
}

TEST(FinalAnswer, RemovesDecoration) {
  EXPECT_EQ(read("**Answer:** 24"), "24");
  EXPECT_EQ(read("Answer: **42**"), "42");
  EXPECT_EQ(read("Answer: *42*."), "42");
  EXPECT_EQ(read("Answer: __42__"), "42");
  EXPECT_EQ(read("FINAL ANSWER: `42`."), "42");
  EXPECT_EQ(read("The answer is: $\\frac{1}{2}$."), "\\frac{1}{2}");
  EXPECT_EQ(read("Answer:: 42"), "42");
  EXPECT_EQ(read("Answer: .5"), ".5");  // a period that starts a number stays
  EXPECT_EQ(read("Answer: ... 5 ..."), "5");
}

TEST(FinalAnswer, AnyBytesAreSafe) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = char(rng() % 256);
    if (i % 3 == 0) s.insert(rng() % (s.size() + 1), i % 2 ? "\\boxed{" : "answer:");
    (void)final_answer(s);
  }
}

// ---- the generated tasks' rule before the merge (commit 141433c, runtime/rl/tasks.cc) ----------

namespace before {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n."), b = s.find_last_not_of(" \t\r\n.");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::pair<size_t, bool> last_marker_end(const std::string& response) {
  std::string low = response;
  for (char& c : low) c = char(std::tolower(static_cast<unsigned char>(c)));
  size_t best = std::string::npos, best_end = std::string::npos;
  bool boxed = false;
  for (const char* m : {"answer:", "answer is", "\\boxed{", "####"}) {
    size_t at = low.rfind(m);
    if (at == std::string::npos || (best != std::string::npos && at <= best)) continue;
    best = at, best_end = at + std::char_traits<char>::length(m);
    boxed = m[0] == '\\';
  }
  return {best_end, boxed};
}

std::string until_closing_brace(const std::string& s, size_t from) {
  int depth = 1;
  for (size_t i = from; i < s.size(); ++i) {
    depth += s[i] == '{' ? 1 : s[i] == '}' ? -1 : 0;
    if (depth == 0) return s.substr(from, i - from);
  }
  return "";
}

std::string strip_decoration(std::string s) {
  for (const char* pair : {"**", "__"}) {
    for (size_t at; (at = s.find(pair)) != std::string::npos;) s.erase(at, 2);
  }
  s = trim(s);
  if (!s.empty() && s[0] == ':') s = trim(s.substr(1));
  if (s.size() >= 2 && (s.front() == '$' || s.front() == '`') && s.back() == s.front())
    s = trim(s.substr(1, s.size() - 2));
  return s;
}

std::string final_answer(const std::string& response) {
  auto [end, boxed] = last_marker_end(response);
  if (end == std::string::npos) return "";
  if (boxed) return strip_decoration(until_closing_brace(response, end));
  size_t nl = response.find('\n', end);
  return strip_decoration(response.substr(end, nl == std::string::npos ? nl : nl - end));
}

}  // namespace before

// A response of the arithmetic-cot shape ("3 + 4 = 7. 7 * 2 = 14. Answer: 14"), marked or not.
std::string arithmetic_response(std::mt19937_64& rng) {
  auto num = [&] { return std::to_string(int64_t(rng() % 200) - 50); };
  std::string s;
  for (int k = int(rng() % 4); k >= 0; --k)
    s += num() + " " + "+-*"[rng() % 3] + " " + num() + " = " + num() + ". ";
  if (rng() % 4 != 0)
    s += "Answer: " + num();
  else
    s += num();
  return s;
}

// A countdown-shaped response ("Answer: (25 - 3) * 7").
std::string countdown_response(std::mt19937_64& rng) {
  auto num = [&] { return std::to_string(1 + rng() % 25); };
  std::string e = num();
  for (int k = int(rng() % 4); k > 0; --k)
    e = (rng() % 2 ? "(" + e + ")" : e) + " " + "+-*/"[rng() % 4] + " " + num();
  return "Answer: " + e;
}

// `s` with a few random edits from the characters a policy of these tasks writes (the ASCII
// codec's printable characters, newlines, the marker words): what a weak policy samples.
std::string perturbed(std::string s, std::mt19937_64& rng) {
  static const std::vector<std::string> pieces = {
      "0", "1",  "2", "7", "9", " ", ".",  "*",  "+",       "-",         "=",
      ":", "\n", "(", ")", "$", "`", "_",  "**", "Answer:", "answer is", "####",
      "A", "n",  "s", "w", "e", "r", "\t", "/",  ","};
  for (int k = int(rng() % 5); k > 0; --k) {
    size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 3) {
      case 0:
        s.insert(at, pieces[rng() % pieces.size()]);
        break;
      case 1:
        if (at < s.size()) s.erase(at, 1 + rng() % 3);
        break;
      default:
        if (at < s.size()) s[at] = pieces[rng() % pieces.size()][0];
    }
  }
  return s;
}

// On the generated tasks' responses without a box (what their policies write), the shared rule
// reads what the tasks' own rule read, except in the three lenient shapes the header names, each
// recognised from the old reading: nothing left after decoration (then the line after the marker
// is read), a '*' or wrapping left around it (the new decoration rule applied to it gives the new
// reading), or a leading period eaten off a number.
TEST(FinalAnswer, ReadsTheGeneratedTasksResponsesAsTheirOwnRuleDid) {
  std::mt19937_64 rng(20261207);
  int n = 0, same = 0, next_line = 0, decoration = 0, period = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string base = i % 3 == 2 ? countdown_response(rng) : arithmetic_response(rng);
    std::string r = i % 4 == 0 ? base : perturbed(base, rng);
    if (r.find("\\boxed{") != std::string::npos || r.find("\\fbox{") != std::string::npos) continue;
    ++n;
    const std::string old_reading = before::final_answer(r);
    const std::string now = final_answer(r).value_or("");
    if (now == old_reading) {
      ++same;
      continue;
    }
    if (!final_answer("Answer: " + old_reading)) {  // nothing, or only decoration ("*")
      if (now.empty()) {
        ++decoration;
      } else {
        ++next_line;
        EXPECT_NE(r.find('\n'), std::string::npos) << r;
      }
      continue;
    }
    if (final_answer("Answer: " + old_reading).value_or("") == now) {
      ++decoration;
      continue;
    }
    if (now.size() > 1 && now[0] == '.' && now.substr(1) == old_reading) {
      ++period;
      continue;
    }
    ADD_FAILURE() << "response \"" << r << "\": before \"" << old_reading << "\", now \"" << now
                  << "\"";
  }
  // Unperturbed responses (a quarter) all read the same; the lenient shapes stay rare.
  std::printf(
      "final answer vs the tasks' rule: %d responses, %d read the same; different: %d "
      "next line, %d decoration, %d period\n",
      n, same, next_line, decoration, period);
  EXPECT_GT(same, n * 99 / 100);
  for (int i = 0; i < 2000; ++i) {
    std::string r = i % 2 ? countdown_response(rng) : arithmetic_response(rng);
    EXPECT_EQ(final_answer(r).value_or(""), before::final_answer(r)) << r;
  }
}

}  // namespace
}  // namespace tlt::reward
