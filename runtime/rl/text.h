// The RL policy's text codec: one token per ASCII character, id 0 is end-of-sequence.
//
// The generated tasks (runtime/rl/tasks.h) are plain ASCII arithmetic, so a 128-token
// vocabulary covers them exactly and keeps the tiny policy small (its LM head is V x C). Bytes
// outside 1..127 encode as '?'; decoding stops at the first end-of-sequence token.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tlt::rl {

inline constexpr int64_t kTextVocab = 128;
inline constexpr int64_t kEndOfText = 0;

inline std::vector<int64_t> encode_text(const std::string& s) {
  std::vector<int64_t> ids;
  ids.reserve(s.size());
  for (unsigned char c : s) ids.push_back(c >= 1 && c < kTextVocab ? int64_t(c) : int64_t('?'));
  return ids;
}

inline std::string decode_text(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    if (id == kEndOfText) break;
    s.push_back(id > 0 && id < kTextVocab ? char(id) : '?');
  }
  return s;
}

}  // namespace tlt::rl
