#include "runtime/reward/answer_text.h"
#include "runtime/reward/ascii.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

namespace tlt::reward {
namespace {

using ascii::is_space;
using ascii::to_lower;

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Trailing periods and spaces removed ("42. " -> "42").
std::string_view strip_trailing_periods(std::string_view s) {
  s = trim(s);
  while (!s.empty() && (s.back() == '.' || is_space(s.back()))) s.remove_suffix(1);
  return s;
}

// A `$` at s[i] that LaTeX would read as a delimiter (not `\$`).
bool is_dollar(std::string_view s, size_t i) {
  return s[i] == '$' && (i == 0 || s[i - 1] != '\\');
}

// The closing `$` (or `$$`) of a segment whose content starts at `start`, or npos. A single `$`
// closes only where pandoc would read one: content not starting or ending with a space, the
// closer not followed by a digit ("paid $5 and got $3" holds no math).
size_t dollar_closer(std::string_view s, size_t start, size_t width) {
  for (size_t j = start; j < s.size(); ++j) {
    if (!is_dollar(s, j)) continue;
    if (width == 2) return s.substr(j, 2) == "$$" ? j : std::string_view::npos;
    bool ok = j > start && !is_space(s[start]) && !is_space(s[j - 1]) &&
              !(j + 1 < s.size() && ascii::is_digit(s[j + 1]));
    return ok ? j : std::string_view::npos;
  }
  return std::string_view::npos;
}

// The last `$...$` or `$$...$$` segment as (content start, content end), or nullopt.
std::optional<std::pair<size_t, size_t>> last_dollar_segment(std::string_view s) {
  std::optional<std::pair<size_t, size_t>> last;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!is_dollar(s, i)) continue;
    const size_t width = s.substr(i, 2) == "$$" ? 2 : 1;
    const size_t close = dollar_closer(s, i + width, width);
    if (close == std::string_view::npos) {
      i += width - 1;
      continue;
    }
    last = std::make_pair(i + width, close);
    i = close + width - 1;
  }
  return last;
}

// The last `open ... close` segment (`\(...\)`, `\[...\]`) as (content start, end), or nullopt.
std::optional<std::pair<size_t, size_t>> last_bracketed(std::string_view s, std::string_view open,
                                                        std::string_view close) {
  size_t end = s.rfind(close);
  if (end == std::string_view::npos) return std::nullopt;
  size_t start = s.rfind(open, end);
  if (start == std::string_view::npos) return std::nullopt;
  return std::make_pair(start + open.size(), end);
}

}  // namespace

std::optional<std::string> last_math_segment(std::string_view response) {
  std::optional<std::pair<size_t, size_t>> best = last_dollar_segment(response);
  for (auto [open, close] : {std::pair<std::string_view, std::string_view>{"\\(", "\\)"},
                             std::pair<std::string_view, std::string_view>{"\\[", "\\]"}}) {
    auto segment = last_bracketed(response, open, close);
    if (segment && (!best || segment->second > best->second)) best = segment;
  }
  if (!best) return std::nullopt;
  std::string_view content = trim(response.substr(best->first, best->second - best->first));
  if (content.empty()) return std::nullopt;
  return std::string(content);
}

std::string normalize_text(std::string_view text) {
  std::string out;
  for (char c : strip_trailing_periods(text)) {
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += to_lower(c);
    }
  }
  return out;
}

}  // namespace tlt::reward
