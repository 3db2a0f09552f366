#include "runtime/rl/tasks.h"

#include "api/fnv.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tlt::rl {
namespace {

// A generator per problem, independent of all others: hash (seed, stream, index).
std::mt19937_64 rng_for(uint64_t seed, bool held_out, uint64_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (held_out ? 0xD1B54A32D192ED03ull : 0) ^ (i + 1);
  x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
  return std::mt19937_64(x);
}

// A problem belongs to the held-out set when its prompt hashes into the first tenth. The two
// streams draw candidates until one lands on their side, so no prompt is ever in both.
bool held_out_prompt(const std::string& prompt) {
  return fnv1a64(prompt) % 10 == 0;
}

int uniform(std::mt19937_64& r, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(r);
}

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

}  // namespace

std::string last_number(const std::string& s) {
  size_t end = s.size();
  while (end > 0 && !is_digit(s[end - 1])) --end;
  if (end == 0) return "";
  size_t start = end;
  while (start > 0 && is_digit(s[start - 1])) --start;
  // "1.5": the digits found are a decimal part when a '.' and a digit precede them.
  if (start >= 2 && s[start - 1] == '.' && is_digit(s[start - 2])) {
    --start;
    while (start > 0 && is_digit(s[start - 1])) --start;
  }
  if (start > 0 && s[start - 1] == '-') {
    char before = start >= 2 ? s[start - 2] : ' ';
    if (!is_digit(before) && !std::isalpha(static_cast<unsigned char>(before)) && before != ')')
      --start;
  }
  return s.substr(start, end - start);
}

std::string unmark_final_answer(const std::string& solution) {
  static const std::string kMarker = "Answer: ";
  size_t at = solution.rfind(kMarker);
  if (at == std::string::npos) return solution;
  return solution.substr(0, at) + solution.substr(at + kMarker.size());
}

std::string expression_before_last_equals(const std::string& s) {
  size_t eq = s.rfind('=');
  if (eq == std::string::npos) return "";
  size_t start = eq;
  auto in_expression = [](char c) {
    return is_digit(c) || (c != '\0' && std::strchr(" +-*/()", c) != nullptr);
  };
  while (start > 0 && in_expression(s[start - 1])) --start;
  size_t a = s.find_first_not_of(' ', start);
  if (a >= eq) return "";
  return s.substr(a, s.find_last_not_of(' ', eq - 1) - a + 1);
}

namespace {

// ---- arithmetic with a chain of thought ----------------------------------------------------

class ArithmeticCot : public Task {
 public:
  ArithmeticCot(uint64_t seed, const TaskOptions& options) : seed_(seed), options_(options) {}

  Problem problem(uint64_t i, bool held_out) const override {
    std::mt19937_64 r = rng_for(seed_, held_out, i);
    for (;;) {
      Problem p = draw(r);
      if (held_out_prompt(p.prompt) == held_out) return p;
    }
  }

  double reward(const Problem& p, const std::string& response) const override {
    std::string got = final_answer(response);
    if (got.empty() && options_.free_text) got = last_number(response);
    if (got.empty() || got.size() > 24) return 0.0;
    char* end = nullptr;
    long long v = std::strtoll(got.c_str(), &end, 10);
    if (end != got.c_str() + got.size()) return 0.0;
    return std::to_string(v) == p.answer ? 1.0 : 0.0;
  }

  std::string chat_prompt(const Problem& p) const override {
    return p.prompt +
           "Apply each operation in order, ignoring the usual precedence, one step per sentence "
           "(\"3 + 4 = 7. 7 * 2 = 14.\"), then end with \"Answer: <number>\".";
  }

 private:
  static Problem draw(std::mt19937_64& r) {
    // Heavy-tailed length: a discretised Pareto, capped at 40 operations.
    double u = std::uniform_real_distribution<double>(1e-9, 1.0)(r);
    int ops = std::min(40, int(1.0 / std::pow(u, 1.0 / 1.3)));
    int64_t value = uniform(r, 1, 9);
    std::string prompt = "Compute left to right: " + std::to_string(value);
    std::string steps;
    for (int k = 0; k < ops; ++k) {
      char op = "+-*"[uniform(r, 0, 2)];
      int64_t x = op == '*' ? uniform(r, 2, 5) : uniform(r, 1, 20);
      if (op == '*' && std::llabs(value) > 1000) op = '-';  // keep numbers small
      int64_t next = op == '+' ? value + x : op == '-' ? value - x : value * x;
      prompt += std::string(" ") + op + " " + std::to_string(x);
      steps += std::to_string(value) + " " + op + " " + std::to_string(x) + " = " +
               std::to_string(next) + ". ";
      value = next;
    }
    prompt += "\n";
    return {prompt, steps + "Answer: " + std::to_string(value), std::to_string(value), {}, {}, {}};
  }

  uint64_t seed_;
  TaskOptions options_;
};

// ---- countdown --------------------------------------------------------------------------

// Exact rational arithmetic on 64-bit integers, refusing overflow.
struct Rational {
  int64_t num = 0, den = 1;
};

// Recursive-descent parser over + - * / and parentheses with exact rationals; records the
// numbers it reads. Returns nullopt on any syntax error, division by zero or overflow.
class ExprParser {
 public:
  explicit ExprParser(const std::string& s) : s_(s) {}
  std::optional<Rational> parse(std::vector<int64_t>* numbers) {
    numbers_ = numbers;
    auto v = expr(0);
    skip();
    if (!v || pos_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  static bool mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
  static std::optional<Rational> norm(int64_t n, int64_t d) {
    if (d == 0) return std::nullopt;
    if (d < 0) n = -n, d = -d;
    int64_t g = std::gcd(n < 0 ? -n : n, d);
    if (g > 1) n /= g, d /= g;
    return Rational{n, d};
  }
  static std::optional<Rational> apply(char op, Rational a, Rational b) {
    int64_t x, y, z;
    if (op == '*') {
      if (!mul(a.num, b.num, &x) || !mul(a.den, b.den, &y)) return std::nullopt;
      return norm(x, y);
    }
    if (op == '/') {
      if (b.num == 0 || !mul(a.num, b.den, &x) || !mul(a.den, b.num, &y)) return std::nullopt;
      return norm(x, y);
    }
    if (!mul(a.num, b.den, &x) || !mul(b.num, a.den, &y) || !mul(a.den, b.den, &z))
      return std::nullopt;
    int64_t n;
    if (op == '+' ? __builtin_add_overflow(x, y, &n) : __builtin_sub_overflow(x, y, &n))
      return std::nullopt;
    return norm(n, z);
  }
  // Precedence levels: 0 is "+ -" over terms, 1 is "* /" over factors.
  std::optional<Rational> expr(int depth) { return level(0, depth); }
  std::optional<Rational> level(int prec, int depth) {
    const char* ops = prec == 0 ? "+-" : "*/";
    auto operand = [&] { return prec == 0 ? level(1, depth) : factor(depth); };
    auto left = operand();
    for (;;) {
      skip();
      if (!left || pos_ >= s_.size() || (s_[pos_] != ops[0] && s_[pos_] != ops[1])) return left;
      char op = s_[pos_++];
      auto right = operand();
      if (!right) return std::nullopt;
      left = apply(op, *left, *right);
    }
  }
  std::optional<Rational> factor(int depth) {
    skip();
    if (depth > 32 || pos_ >= s_.size()) return std::nullopt;
    if (s_[pos_] == '(') {
      ++pos_;
      auto v = expr(depth + 1);
      skip();
      if (!v || pos_ >= s_.size() || s_[pos_] != ')') return std::nullopt;
      ++pos_;
      return v;
    }
    size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])) &&
           pos_ - start < 9)
      ++pos_;
    if (pos_ == start) return std::nullopt;
    int64_t n = std::stoll(s_.substr(start, pos_ - start));
    numbers_->push_back(n);
    return Rational{n, 1};
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::vector<int64_t>* numbers_ = nullptr;
};

class Countdown : public Task {
 public:
  Countdown(uint64_t seed, const TaskOptions& options) : seed_(seed), options_(options) {}

  Problem problem(uint64_t i, bool held_out) const override {
    std::mt19937_64 r = rng_for(seed_, held_out, i);
    for (;;) {
      int n = uniform(r, 3, 5);
      std::vector<int64_t> nums;
      for (int k = 0; k < n; ++k) nums.push_back(uniform(r, 1, 25));
      // Build a target from a random expression over a random order of some of the numbers.
      std::vector<int64_t> order = nums;
      std::shuffle(order.begin(), order.end(), r);
      int used = uniform(r, 2, n);
      std::string expr = std::to_string(order[0]);
      int64_t value = order[0];
      for (int k = 1; k < used; ++k) {
        char op = "+-*"[uniform(r, 0, 2)];
        int64_t x = order[k];
        value = op == '+' ? value + x : op == '-' ? value - x : value * x;
        expr = (k > 1 ? "(" + expr + ")" : expr) + " " + op + " " + std::to_string(x);
      }
      if (value <= 0 || value > 1000) continue;
      std::string prompt = "Numbers:";
      for (int64_t x : nums) prompt += " " + std::to_string(x);
      prompt += ". Target: " + std::to_string(value) + ". Use each number at most once.\n";
      if (held_out_prompt(prompt) != held_out) continue;
      return {prompt, "Answer: " + expr, std::to_string(value), {}, {}, {}};
    }
  }

  double reward(const Problem& p, const std::string& response) const override {
    std::string got = final_answer(response);
    if (got.empty() && options_.free_text) got = expression_before_last_equals(response);
    if (got.empty() || got.size() > 200) return 0.0;
    std::vector<int64_t> used;
    std::optional<Rational> v = ExprParser(got).parse(&used);
    if (!v || v->den != 1 || std::to_string(v->num) != p.answer) return 0.0;
    std::vector<int64_t> allowed = given_numbers(p.prompt);
    std::sort(used.begin(), used.end());
    std::sort(allowed.begin(), allowed.end());
    return std::includes(allowed.begin(), allowed.end(), used.begin(), used.end()) ? 1.0 : 0.0;
  }

  std::string chat_prompt(const Problem& p) const override {
    return p.prompt +
           "Combine the numbers with + - * and / to reach the target, then end with \"Answer: "
           "<expression>\", e.g. \"Answer: (25 - 3) * 7\".";
  }

 private:
  static std::vector<int64_t> given_numbers(const std::string& prompt) {
    std::vector<int64_t> out;
    size_t at = prompt.find("Numbers:"), end = prompt.find(". Target:");
    if (at == std::string::npos || end == std::string::npos) return out;
    std::string list = prompt.substr(at + 8, end - at - 8);
    size_t pos = 0;
    while (pos < list.size()) {
      while (pos < list.size() && list[pos] == ' ') ++pos;
      size_t start = pos;
      while (pos < list.size() && std::isdigit(static_cast<unsigned char>(list[pos]))) ++pos;
      if (pos > start) out.push_back(std::stoll(list.substr(start, pos - start)));
      if (pos == start) ++pos;
    }
    return out;
  }

  uint64_t seed_;
  TaskOptions options_;
};

}  // namespace

StatusOr<std::vector<int64_t>> prompt_ids(const Codec& codec, const Task& task, const Problem& p) {
  return task.encode(codec, p);
}

StatusOr<FittedProblem> fitting_problem(const Task& task, const Codec& codec, uint64_t i,
                                        bool held_out, int64_t max_prompt) {
  constexpr uint64_t kRedrawStride = uint64_t(1) << 40;  // far past any index a run reads
  for (uint64_t k = 0; k < 100; ++k) {
    FittedProblem f{task.problem(i + k * kRedrawStride, held_out), {}};
    StatusOr<std::vector<int64_t>> ids = prompt_ids(codec, task, f.problem);
    if (!ids.ok()) return ids.status();
    if (int64_t(ids->size()) > max_prompt) continue;
    f.prompt = std::move(*ids);
    return f;
  }
  return Status::FailedPrecondition(
      "no problem of the task has a prompt of at most " + std::to_string(max_prompt) +
      " tokens, what the model's context leaves besides spec.algorithm.maxResponseTokens: "
      "lower maxResponseTokens or use a model of longer context");
}

StatusOr<std::unique_ptr<Task>> make_task(const std::string& name, uint64_t seed,
                                          const TaskOptions& options) {
  if (name == "arithmetic-cot") return std::unique_ptr<Task>(new ArithmeticCot(seed, options));
  if (name == "countdown") return std::unique_ptr<Task>(new Countdown(seed, options));
  return Status::NotFound("task \"" + name + "\": use arithmetic-cot or countdown");
}

}  // namespace tlt::rl
