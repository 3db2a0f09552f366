#include "runtime/reward/final_answer.h"

#include <string>

#include "runtime/reward/ascii.h"

namespace tlt::reward {
namespace {

using ascii::is_digit;
using ascii::is_space;

constexpr size_t npos = std::string_view::npos;

// The last `\boxed{` or `\fbox{` of `s`: where its content starts, or npos when there is none.
size_t last_box(std::string_view s) {
  size_t best = npos, start = npos;
  for (std::string_view marker : {"\\boxed{", "\\fbox{"}) {
    size_t at = s.rfind(marker);
    if (at != npos && (best == npos || at > best)) best = at, start = at + marker.size();
  }
  return start;
}

// The text from `from` to the brace that closes one opened just before it; nullopt when none does.
std::optional<std::string_view> until_closing_brace(std::string_view s, size_t from) {
  int depth = 1;
  for (size_t i = from; i < s.size(); ++i) {
    depth += s[i] == '{' ? 1 : s[i] == '}' ? -1 : 0;
    if (depth == 0) return s.substr(from, i - from);
  }
  return std::nullopt;
}

// Where the text after the last of "answer:", "answer is", "####" (ASCII case-insensitive)
// starts, or npos when there is none.
size_t after_last_marker(std::string_view s) {
  std::string lower(s);
  for (char& c : lower) c = ascii::to_lower(c);
  size_t best = npos, end = npos;
  for (std::string_view marker : {"answer:", "answer is", "####"}) {
    size_t at = lower.rfind(marker);
    if (at != npos && (best == npos || at > best)) best = at, end = at + marker.size();
  }
  return end;
}

// Blanks and periods removed from both ends, except a period that starts a number (".5").
std::string_view trim(std::string_view s) {
  auto drop_front = [&] {
    if (s.empty()) return false;
    if (is_space(s.front())) return true;
    return s.front() == '.' && !(s.size() > 1 && is_digit(s[1]));
  };
  while (drop_front()) s.remove_prefix(1);
  while (!s.empty() && (is_space(s.back()) || s.back() == '.')) s.remove_suffix(1);
  return s;
}

// Rule 3 of the header: emphasis, a leading ':', '*' at the ends, a wrapping '$' or '`' pair.
std::string strip_decoration(std::string_view text) {
  std::string s(text);
  for (std::string_view pair : {"**", "__"}) {
    for (size_t at; (at = s.find(pair)) != std::string::npos;) s.erase(at, 2);
  }
  std::string_view v = trim(s);
  if (!v.empty() && v.front() == ':') v = trim(v.substr(1));
  while (!v.empty() && v.front() == '*') v.remove_prefix(1);
  while (!v.empty() && v.back() == '*') v.remove_suffix(1);
  v = trim(v);
  if (v.size() >= 2 && (v.front() == '$' || v.front() == '`') && v.back() == v.front())
    v = trim(v.substr(1, v.size() - 2));
  return std::string(v);
}

// The line of `s` that starts at `from` (to its '\n' or the end).
std::string_view line_at(std::string_view s, size_t from) {
  std::string_view rest = s.substr(from);
  return rest.substr(0, rest.find('\n'));
}

std::optional<std::string> non_empty(std::string s) {
  if (s.empty()) return std::nullopt;
  return s;
}

}  // namespace

std::optional<std::string> final_answer(std::string_view response) {
  if (size_t box = last_box(response); box != npos) {
    std::optional<std::string_view> content = until_closing_brace(response, box);
    if (!content) return std::nullopt;
    return non_empty(strip_decoration(*content));
  }
  size_t at = after_last_marker(response);
  if (at == npos) return std::nullopt;
  std::string_view line = line_at(response, at);
  std::string answer = strip_decoration(line);
  const size_t next = at + line.size() + 1;
  if (answer.empty() && next < response.size())  // "The answer is:\n42"
    answer = strip_decoration(line_at(response, next));
  return non_empty(std::move(answer));
}

}  // namespace tlt::reward
