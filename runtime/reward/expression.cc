// evaluate_expression (answer_text.h): a recursive-descent evaluator of constant arithmetic.
//   expr  := term (('+' | '-') term)*
//   term  := unary (('*' | '/') unary | unary)*     the bare second form: implicit multiplication
//   unary := ('-' | '+') unary | power
//   power := primary ('^' unary)?
//   primary := number | '(' expr ')' | 'sqrt' '(' expr ')' | 'pi'
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/reward/answer_text.h"

namespace tlt::reward {
namespace {

constexpr int kMaxDepth = 64;  // deeper nesting is refused rather than risking the stack

class Evaluator {
 public:
  explicit Evaluator(std::string_view s) : s_(s) {}

  std::optional<double> run() {
    double value = expr();
    if (failed_ || i_ != s_.size() || !std::isfinite(value)) return std::nullopt;
    return value;
  }

 private:
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool accept(std::string_view token) {
    if (s_.substr(i_, token.size()) != token) return false;
    i_ += token.size();
    return true;
  }
  double fail() {
    failed_ = true;
    return 0;
  }

  double expr() {
    if (++depth_ > kMaxDepth) return fail();
    double value = term();
    while (!failed_ && (peek('+') || peek('-'))) {
      bool plus = s_[i_++] == '+';
      double rhs = term();
      value = plus ? value + rhs : value - rhs;
    }
    --depth_;
    return value;
  }

  bool starts_factor() const {
    return peek('(') || s_.substr(i_, 4) == "sqrt" || s_.substr(i_, 2) == "pi" ||
           (i_ < s_.size() && ((s_[i_] >= '0' && s_[i_] <= '9') || s_[i_] == '.') && i_ > 0 &&
            s_[i_ - 1] == ')');
  }

  double term() {
    double value = unary();
    while (!failed_) {
      if (peek('*') || peek('/')) {
        bool times = s_[i_++] == '*';
        double rhs = unary();
        if (!times && rhs == 0) return fail();
        value = times ? value * rhs : value / rhs;
      } else if (starts_factor()) {
        value *= unary();
      } else {
        break;
      }
    }
    return value;
  }

  double unary() {
    if (++depth_ > kMaxDepth) return fail();
    double value;
    if (peek('-') || peek('+')) {
      bool minus = s_[i_++] == '-';
      value = minus ? -unary() : unary();
    } else {
      value = primary();
      if (!failed_ && accept("^")) value = std::pow(value, unary());
    }
    --depth_;
    return value;
  }

  double primary() {
    const bool root = accept("sqrt");
    if (accept("(")) {
      double value = expr();
      if (!accept(")")) return fail();
      return root ? std::sqrt(value) : value;
    }
    if (root) return fail();
    if (accept("pi")) return M_PI;
    size_t start = i_;
    while (i_ < s_.size() && ((s_[i_] >= '0' && s_[i_] <= '9') || s_[i_] == '.')) ++i_;
    if (i_ == start) return fail();
    std::string digits(s_.substr(start, i_ - start));
    char* end = nullptr;
    double value = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size()) return fail();
    return value;
  }

  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
  bool failed_ = false;
};

}  // namespace

std::optional<double> evaluate_expression(std::string_view text) {
  if (text.empty()) return std::nullopt;
  return Evaluator(text).run();
}

}  // namespace tlt::reward
