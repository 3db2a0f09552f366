// Drafting strategies ("arms") as users name them in spec.speculative.arms. Header-only: the
// LibTorch core (built without yaml-cpp on GPU machines) parses arms with the same code.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tlt::api {

// One drafting strategy: "D_K_N" (depth, top-k, tokens verified; K = 1 is a chain), "ngram" (a
// model-free draft of up to kNgramDepth tokens copied from the request's own context) or
// "ngram_D" (up to D tokens: shorter drafts verify fewer tokens, which pays where verification
// is bound by arithmetic, at larger batches). An n-gram arm has top_k 0 and verifies depth + 1.
// "history": a model-free tree of up to kHistoryDepth levels and kHistoryTokens verified tokens
// (root included), of what followed the request's context in responses already finished for the
// same prompt (runtime/rollout/draft_history.h); top_k 0.
struct Arm {
  int32_t depth = 0, top_k = 0, verify_tokens = 0;
  bool ngram = false;
  bool history = false;
};

constexpr int32_t kNgramDepth = 8;      // the plain "ngram" arm's longest draft
constexpr int32_t kHistoryDepth = 8;    // the "history" arm's deepest draft
constexpr int32_t kHistoryTokens = 12;  // and the tokens it verifies, its root included

inline const char* arm_syntax_hint() {
  return "must be \"depth_topk_verifyTokens\" such as \"8_4_48\", \"ngram\", \"ngram_D\" "
         "such as \"ngram_4\" or \"history\"";
}

// Parses an arm name. Returns false with *why set when the text is not an arm.
inline bool parse_arm(const std::string& text, Arm* arm, std::string* why) {
  if (text == "ngram") {
    *arm = Arm{kNgramDepth, 0, kNgramDepth + 1, true};
    return true;
  }
  if (text == "history") {
    *arm = Arm{kHistoryDepth, 0, kHistoryTokens, false, true};
    return true;
  }
  const std::string prefix = "ngram_";
  if (text.compare(0, prefix.size(), prefix) == 0) {
    std::string digits = text.substr(prefix.size());
    if (digits.empty() || digits.size() > 4 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      *why = arm_syntax_hint();
      return false;
    }
    int d = std::stoi(digits);
    if (d < 1 || d > 64) {
      *why = "an n-gram arm drafts 1 to 64 tokens (\"ngram_1\" .. \"ngram_64\")";
      return false;
    }
    *arm = Arm{d, 0, d + 1, true};
    return true;
  }
  int d = 0, k = 0, n = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%d_%d_%d%c", &d, &k, &n, &tail) != 3 ||
      text.find_first_not_of("0123456789_") != std::string::npos) {
    *why = arm_syntax_hint();
    return false;
  }
  if (d < 1 || d > 64 || k < 1 || k > 64 || n < 1) {
    *why = "needs 1 <= depth <= 64, 1 <= topk <= 64 and verifyTokens >= 1";
    return false;
  }
  // A tree of depth d expanding top-k per level offers k + (d-1)k^2 candidates plus its root.
  long long candidates = 1 + k + static_cast<long long>(d - 1) * k * k;
  if (n > candidates) {
    *why = "verifies " + std::to_string(n) + " tokens but a depth-" + std::to_string(d) + " top-" +
           std::to_string(k) + " tree has only " + std::to_string(candidates) +
           "; lower verifyTokens or raise depth/topk";
    return false;
  }
  *arm = Arm{d, k, n, false};
  return true;
}

}  // namespace tlt::api
