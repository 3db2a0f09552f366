// normalize_latex (answer_text.h): LaTeX-lite rewriting of a final answer into plain text.
#include <string>
#include <string_view>

#include "runtime/reward/answer_text.h"
#include "runtime/reward/ascii.h"

namespace tlt::reward {
namespace {

using ascii::is_alpha;
using ascii::is_digit;
using ascii::is_space;

// Position of the next `\name` at or after `from` that is a whole command (not followed by a
// letter: `\left` is not found in `\leftarrow`), or npos.
size_t find_command(const std::string& s, std::string_view name, size_t from = 0) {
  const std::string needle = "\\" + std::string(name);
  for (size_t pos = s.find(needle, from); pos != std::string::npos; pos = s.find(needle, pos + 1)) {
    size_t end = pos + needle.size();
    bool letter_name = is_alpha(name.back());
    if (!letter_name || end >= s.size() || !is_alpha(s[end])) return pos;
  }
  return std::string::npos;
}

// Every whole `\name` replaced by `with`.
void replace_command(std::string& s, std::string_view name, std::string_view with) {
  for (size_t pos = find_command(s, name); pos != std::string::npos;
       pos = find_command(s, name, pos + with.size())) {
    s.replace(pos, name.size() + 1, with);
  }
}

void replace_all(std::string& s, std::string_view what, std::string_view with) {
  for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + with.size()))
    s.replace(pos, what.size(), with);
}

// One argument of a command starting at or after `pos` (spaces skipped): a braced group (its
// content) or a single character (`\frac12`). Sets `end` just past it; false at the end.
bool read_argument(const std::string& s, size_t pos, std::string& arg, size_t& end) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  if (pos >= s.size()) return false;
  if (s[pos] != '{') {
    arg = s.substr(pos, 1);
    end = pos + 1;
    return true;
  }
  int depth = 0;
  for (size_t i = pos; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) {
      arg = s.substr(pos + 1, i - pos - 1);
      end = i + 1;
      return true;
    }
  }
  return false;
}

// `x` as an operand: bare when it is one number or one letter, else parenthesised.
std::string operand(const std::string& x) {
  bool number = !x.empty();
  for (char c : x) number = number && (is_digit(c) || c == '.');
  if (number || (x.size() == 1 && is_alpha(x[0]))) return x;
  return "(" + x + ")";
}

// Rewrites every `\name{args...}` (rightmost first, so nested ones are done before their
// parents) through `rewrite`, which gets the arguments.
template <class Rewrite>
void rewrite_command(std::string& s, std::string_view name, int n_args, Rewrite rewrite) {
  size_t pos = s.rfind("\\" + std::string(name));
  while (pos != std::string::npos) {
    size_t end = pos + name.size() + 1;
    if (end < s.size() && is_alpha(s[end]) && is_alpha(name.back())) {
      pos = pos == 0 ? std::string::npos : s.rfind("\\" + std::string(name), pos - 1);
      continue;
    }
    std::string args[2];
    bool ok = true;
    for (int i = 0; i < n_args && ok; ++i) ok = read_argument(s, end, args[i], end);
    if (ok) s.replace(pos, end - pos, rewrite(args[0], args[1]));
    pos = pos == 0 ? std::string::npos : s.rfind("\\" + std::string(name), pos - 1);
  }
}

// A whole number right before `\frac{a}{b}` of digits is a mixed number: `2\frac{1}{2}` ->
// `(2+1/2)`.
void rewrite_mixed_numbers(std::string& s) {
  for (size_t pos = find_command(s, "frac"); pos != std::string::npos;
       pos = find_command(s, "frac", pos + 1)) {
    size_t first = pos;
    while (first > 0 && is_digit(s[first - 1])) --first;
    if (first == pos || (first > 0 && (s[first - 1] == '.' || is_alpha(s[first - 1])))) continue;
    std::string a, b;
    size_t end = pos + 5;
    if (!read_argument(s, end, a, end) || !read_argument(s, end, b, end)) continue;
    if (operand(a) != a || operand(b) != b || a.find('.') != std::string::npos) continue;
    std::string mixed = "(" + s.substr(first, pos - first) + "+" + a + "/" + b + ")";
    s.replace(first, end - first, mixed);
    pos = first + mixed.size() - 1;
  }
}

void rewrite_sqrt(std::string& s) {
  replace_all(s, "\\sqrt[", "\\root[");  // \sqrt[n]{x}: kept apart from \sqrt{x}
  rewrite_command(s, "sqrt", 1,
                  [](const std::string& x, const std::string&) { return "sqrt(" + x + ")"; });
}

void rewrite_powers(std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    out += s[i];
    if (s[i] != '^' || i + 1 >= s.size() || s[i + 1] != '{') continue;
    std::string arg;
    size_t end = i + 1;
    if (!read_argument(s, i + 1, arg, end)) continue;
    out += operand(arg);
    i = end - 1;
  }
  s = out;
}

void remove_spacing(std::string& s) {
  for (std::string_view name : {"left", "right", "displaystyle", "!", ",", ";", ":", " "})
    replace_command(s, name, "");
  for (std::string_view degree : {"^{\\circ}", "^\\circ", "\\circ", "\\degree"})
    replace_all(s, degree, "");
  replace_all(s, "\\$", "");
  replace_all(s, "$", "");
  replace_all(s, "\\{", "{");
  replace_all(s, "\\}", "}");
  replace_all(s, "{,}", ",");
  replace_all(s, "\\%", "%");
  replace_command(s, "cdot", "*");
  replace_command(s, "times", "*");
  replace_command(s, "pi", "pi");
}

}  // namespace

std::string normalize_latex(std::string_view text) {
  std::string s(text);
  remove_spacing(s);
  for (std::string_view name : {"text", "textbf", "mathrm", "mbox", "textrm", "mathbf"}) {
    rewrite_command(s, name, 1, [](const std::string& x, const std::string&) { return x; });
  }
  replace_command(s, "dfrac", "\\frac");
  replace_command(s, "tfrac", "\\frac");
  rewrite_mixed_numbers(s);
  rewrite_command(s, "frac", 2, [](const std::string& a, const std::string& b) {
    return operand(a) + "/" + operand(b);
  });
  rewrite_sqrt(s);
  rewrite_powers(s);
  std::string out;
  for (char c : s) {
    if (is_space(c) || c == '{' || c == '}') continue;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  while (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

}  // namespace tlt::reward
