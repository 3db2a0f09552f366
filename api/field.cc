// Syntax checks shared by the decoder and the validator: durations, quantities, DNS labels,
// and the typo suggester.
#include "api/field.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstdlib>

namespace tlt::api {

Duration Duration::of(const char* text) {
  Duration d;
  d.text = text;
  [[maybe_unused]] bool ok = parse_duration(d.text, &d.seconds);
  assert(ok && "Duration::of needs a valid literal");
  return d;
}

namespace {

// Reads one "<number><unit>" term at *pos; returns false on bad syntax.
bool read_duration_term(const std::string& s, size_t* pos, double* seconds) {
  size_t i = *pos;
  size_t start = i;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == start) return false;
  std::string number = s.substr(start, i - start);
  if (std::count(number.begin(), number.end(), '.') > 1 || number == ".") return false;
  double value = std::strtod(number.c_str(), nullptr);
  struct Unit {
    const char* name;
    double scale;
  };
  // Longest names first so "ms" is not read as "m" followed by "s".
  static const Unit kUnits[] = {{"ns", 1e-9},  {"us", 1e-6}, {"ms", 1e-3},
                                {"h", 3600.0}, {"m", 60.0},  {"s", 1.0}};
  for (const Unit& u : kUnits) {
    size_t n = std::char_traits<char>::length(u.name);
    if (s.compare(i, n, u.name) == 0) {
      *seconds += value * u.scale;
      *pos = i + n;
      return true;
    }
  }
  return false;
}

}  // namespace

bool parse_duration(const std::string& text, double* seconds) {
  if (text.empty() || text.size() > 64) return false;
  double total = 0.0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!read_duration_term(text, &pos, &total)) return false;
  }
  *seconds = total;
  return true;
}

bool is_quantity(const std::string& text) {
  if (text.empty() || text.size() > 64) return false;
  size_t i = 0;
  if (text[i] == '+') ++i;  // no '-': a resource quantity is never negative
  size_t digits = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  std::string suffix = text.substr(i);
  static const char* kSuffixes[] = {"",  "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n",
                                    "u", "m",  "k",  "M",  "G",  "T",  "P",  "E"};
  for (const char* s : kSuffixes) {
    if (suffix == s) return true;
  }
  if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    size_t j = 1;
    if (suffix[j] == '+' || suffix[j] == '-') ++j;
    if (j == suffix.size()) return false;
    for (; j < suffix.size(); ++j) {
      if (!std::isdigit(static_cast<unsigned char>(suffix[j]))) return false;
    }
    return true;
  }
  return false;
}

bool is_dns_label(const std::string& text) {
  if (text.empty() || text.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(text.front()) || !alnum(text.back())) return false;
  return std::all_of(text.begin(), text.end(), [&](char c) { return alnum(c) || c == '-'; });
}

namespace {

// `text` with every %2e / %2E read as '.'.
std::string decode_dots(std::string text) {
  for (size_t at = text.find('%'); at != std::string::npos; at = text.find('%', at + 1)) {
    if (at + 2 < text.size() && text[at + 1] == '2' && (text[at + 2] == 'e' || text[at + 2] == 'E'))
      text.replace(at, 3, ".");
  }
  return text;
}

bool has_encoded_slash(const std::string& text) {
  for (size_t at = text.find('%'); at != std::string::npos; at = text.find('%', at + 1)) {
    if (at + 2 >= text.size()) break;
    char hi = text[at + 1], lo = static_cast<char>(std::tolower(text[at + 2]));
    if ((hi == '2' && lo == 'f') || (hi == '5' && lo == 'c')) return true;
  }
  return false;
}

}  // namespace

std::string url_path_problem(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  size_t start = scheme + 3, end = url.find_first_of("?#", start);
  // The authority and the path: what a prefix allow-list compares.
  std::string head = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (has_encoded_slash(head) || head.find('\\') != std::string::npos)
    return "has an encoded slash or a backslash (%2f, %5c or \\) before its query, which servers "
           "may read as \"/\"; write the path with plain \"/\"";
  size_t slash = head.find('/');
  for (size_t at = slash; at != std::string::npos;) {
    size_t next = head.find('/', at + 1);
    std::string segment = head.substr(at + 1, next == std::string::npos ? next : next - at - 1);
    segment = decode_dots(segment.substr(0, segment.find(';')));  // "..;x" is ".." to servers
    if (segment == "." || segment == "..")
      return "has a \".\" or \"..\" segment in its path (%2e counts as \".\"), which servers "
             "resolve, so the URL reaches outside the prefix it names; write the path without it";
    at = next;
  }
  return "";
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      char ca = static_cast<char>(std::tolower(static_cast<unsigned char>(a[i - 1])));
      char cb = static_cast<char>(std::tolower(static_cast<unsigned char>(b[j - 1])));
      size_t sub = prev[j - 1] + (ca == cb ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string nearest_name(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.size() > 256) return "";
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  size_t allowed = std::max<size_t>(2, word.size() / 3);
  return best_distance <= allowed ? best : "";
}

}  // namespace tlt::api
