#include "runtime/reward/answer_text.h"
#include "runtime/reward/ascii.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = to_lower(c);
  return out;
}

// The index just past the brace that closes the one opening at s[open], or s.size() when it
// never closes.
size_t closing_brace(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return i + 1;
  }
  return s.size();
}

std::optional<std::string> boxed_content(std::string_view s) {
  size_t best = std::string_view::npos, len = 0;
  for (std::string_view marker : {"\\boxed{", "\\fbox{"}) {
    size_t pos = s.rfind(marker);
    if (pos != std::string_view::npos && (best == std::string_view::npos || pos > best)) {
      best = pos;
      len = marker.size();
    }
  }
  if (best == std::string_view::npos) return std::nullopt;
  size_t open = best + len - 1;
  size_t end = closing_brace(s, open);
  size_t stop = (end > open + 1 && end <= s.size() && s[end - 1] == '}') ? end - 1 : s.size();
  return std::string(s.substr(open + 1, stop - open - 1));
}

std::optional<std::string> marked_line(std::string_view s) {
  const std::string lower = lower_ascii(s);
  size_t best = std::string::npos, len = 0;
  for (std::string_view marker : {"####", "answer is", "answer:"}) {
    size_t pos = lower.rfind(marker);
    if (pos != std::string::npos && (best == std::string::npos || pos > best)) {
      best = pos;
      len = marker.size();
    }
  }
  if (best == std::string::npos) return std::nullopt;
  std::string_view rest = s.substr(best + len);
  std::string_view line = rest.substr(0, rest.find('\n'));
  const size_t next = line.size() + 1;
  line = trim(line);
  while (!line.empty() && line.front() == ':') line = trim(line.substr(1));
  if (line.empty() && next < rest.size()) {  // "The answer is:\n42"
    line = trim(rest.substr(next, rest.find('\n', next) - next));
  }
  return std::string(line);
}

}  // namespace

std::optional<std::string> extract_final_answer(std::string_view response) {
  if (auto boxed = boxed_content(response)) return boxed;
  return marked_line(response);
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
