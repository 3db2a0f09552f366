// JSON parsing with a nesting limit, for every JSON that crosses a trust boundary (dataset rows,
// driver-worker messages, reward answers): nlohmann::json parses any depth, but dumping,
// comparing or walking a value a million levels deep recurses once per level and overflows the
// stack. parse_json_bounded scans the text first (brackets outside strings) and refuses it
// before nlohmann builds anything.
//
// Errors: InvalidArgument naming `where` (a file and line, a message kind) and the fix, for text
// nested deeper than max_depth or that is not JSON.
// Thread safety: functions; no shared state. Header-only (used by binaries with and without
// LibTorch).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::api {

// Far deeper than any dataset row, message or reward answer tlt reads (they nest < 10 levels);
// far shallower than what overflows a 8 MiB stack in a recursive walk (~75k levels).
inline constexpr int kMaxJsonDepth = 128;

// The deepest nesting of arrays and objects in `text`, stopping early once it passes `limit`.
inline int json_depth(std::string_view text, int limit = kMaxJsonDepth) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// Parses `text`, refusing nesting deeper than max_depth. `where` names the input for the error
// ("data/train.jsonl line 12", "the worker's message").
inline StatusOr<nlohmann::json> parse_json_bounded(std::string_view text, const std::string& where,
                                                   int max_depth = kMaxJsonDepth) {
  if (json_depth(text, max_depth) > max_depth) {
    return Status::InvalidArgument(where + ": JSON nested deeper than " +
                                   std::to_string(max_depth) +
                                   " levels; flatten it (tlt reads at most that depth)");
  }
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(where + ": not valid JSON");
  return j;
}

}  // namespace tlt::api
