// Drafting strategies ("arms") as users name them in spec.speculative.arms. Header-only: the
// LibTorch core (built without yaml-cpp on GPU machines) parses arms with the same code.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tlt::api {

// One drafting strategy: "D_K_N" (depth, top-k, tokens verified; K = 1 is a chain) or "ngram".
struct Arm {
  int32_t depth = 0, top_k = 0, verify_tokens = 0;
  bool ngram = false;
};

// Parses an arm name. Returns false with *why set when the text is not an arm.
inline bool parse_arm(const std::string& text, Arm* arm, std::string* why) {
  if (text == "ngram") {
    *arm = Arm{0, 0, 0, true};
    return true;
  }
  int d = 0, k = 0, n = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%d_%d_%d%c", &d, &k, &n, &tail) != 3 ||
      text.find_first_not_of("0123456789_") != std::string::npos) {
    *why = "must be \"depth_topk_verifyTokens\" such as \"8_4_48\", or \"ngram\"";
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
