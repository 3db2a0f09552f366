// ASCII-only character classes for the reward verifiers' byte-level parsing. <cctype> is not
// used: its functions are undefined for negative chars (bytes >= 0x80 of non-ASCII text) and
// depend on the locale. Internal to runtime/reward/.
//
// Thread safety: pure functions.
#pragma once

namespace tlt::reward::ascii {

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool is_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}
inline char to_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace tlt::reward::ascii
