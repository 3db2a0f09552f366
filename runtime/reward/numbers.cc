// parse_number, last_number, evaluate_expression, numbers_equal (answer_text.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/reward/answer_text.h"
#include "runtime/reward/ascii.h"

namespace tlt::reward {
namespace {

using ascii::is_alpha;
using ascii::is_digit;
using ascii::is_space;

size_t skip_digits(std::string_view s, size_t i) {
  while (i < s.size() && is_digit(s[i])) ++i;
  return i;
}

// An unsigned integer or decimal starting at s[i] (thousands separators allowed); its digits
// without separators go to `digits`. Returns the index past it, or i when there is none.
size_t scan_unsigned(std::string_view s, size_t i, std::string& digits, bool& has_point) {
  size_t end = skip_digits(s, i);
  if (end == i) return i;
  digits.assign(s.substr(i, end - i));
  // ",ddd" groups of exactly three digits, after a first group of at most three.
  const bool groups = end - i <= 3;
  while (groups && end + 4 <= s.size() && s[end] == ',' && skip_digits(s, end + 1) == end + 4) {
    digits.append(s.substr(end + 1, 3));
    end += 4;
  }
  has_point = false;
  if (end + 1 < s.size() && s[end] == '.' && is_digit(s[end + 1])) {
    size_t frac_end = skip_digits(s, end + 1);
    digits.append(s.substr(end, frac_end - end));
    end = frac_end;
    has_point = true;
  }
  return end;
}

// A number literal (sign handled by the caller) starting at s[i]: integer, decimal or a/b.
size_t scan_literal(std::string_view s, size_t i, bool negative, Number& number) {
  std::string digits;
  bool has_point = false;
  size_t end = scan_unsigned(s, i, digits, has_point);
  if (end == i) return i;
  double value = std::strtod(digits.c_str(), nullptr);
  number.integer.reset();
  if (end + 1 < s.size() && s[end] == '/' && is_digit(s[end + 1])) {
    size_t den_end = skip_digits(s, end + 1);
    double den = std::strtod(std::string(s.substr(end + 1, den_end - end - 1)).c_str(), nullptr);
    if (den != 0) {
      number.value = (negative ? -value : value) / den;
      return den_end;
    }
  }
  number.value = negative ? -value : value;
  if (!has_point) {
    size_t first = digits.find_first_not_of('0');
    std::string canonical = first == std::string::npos ? "0" : digits.substr(first);
    number.integer = (negative && canonical != "0" ? "-" : "") + canonical;
  }
  return end;
}

// What may follow a number in an answer: a percent sign or a unit of letters and spaces.
bool is_suffix(std::string_view rest) {
  while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
  if (rest == "%" || rest.empty()) return true;
  return std::all_of(rest.begin(), rest.end(),
                     [](char c) {
                       return is_alpha(c) || is_space(c) || c == '^' || c == '/' || is_digit(c);
                     }) &&
         is_alpha(rest.front());
}

}  // namespace

std::optional<Number> parse_number(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && (is_space(text.back()) || text.back() == '.')) text.remove_suffix(1);
  bool negative = false;
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (!text.empty() && text.front() == '$') text.remove_prefix(1);
  Number number;
  size_t end = scan_literal(text, 0, negative, number);
  if (end == 0 || !is_suffix(text.substr(end))) return std::nullopt;
  if (!std::isfinite(number.value) && !number.integer) return std::nullopt;
  return number;
}

std::optional<Number> last_number(std::string_view text) {
  std::optional<Number> last;
  for (size_t i = 0; i < text.size();) {
    bool starts = is_digit(text[i]) && (i == 0 || !is_alpha(text[i - 1]));
    if (!starts) {
      ++i;
      continue;
    }
    bool negative = i > 0 && text[i - 1] == '-' &&
                    (i == 1 || !(is_digit(text[i - 2]) || is_alpha(text[i - 2])));
    Number number;
    size_t end = scan_literal(text, i, negative, number);
    if (std::isfinite(number.value) || number.integer) last = number;
    i = std::max(end, i + 1);
    while (i < text.size() && (is_digit(text[i]) || is_alpha(text[i]))) ++i;
  }
  return last;
}

bool numbers_equal(const Number& a, const Number& b, double relative_tolerance,
                   double absolute_tolerance) {
  if (a.integer && b.integer) return *a.integer == *b.integer;
  if (!std::isfinite(a.value) || !std::isfinite(b.value)) return false;
  double scale = std::max(std::fabs(a.value), std::fabs(b.value));
  return std::fabs(a.value - b.value) <= std::max(absolute_tolerance, relative_tolerance * scale);
}

}  // namespace tlt::reward
