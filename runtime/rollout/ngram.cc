#include "runtime/rollout/ngram.h"

namespace tlt::rollout {

std::vector<int64_t> ngram_propose(const std::vector<int64_t>& context, int32_t k, int32_t max_n,
                                   int32_t min_n) {
  const int64_t len = static_cast<int64_t>(context.size());
  for (int32_t n = max_n; n >= min_n; --n) {
    if (len < n + 1) continue;
    // Search backwards for an earlier occurrence of the last n tokens.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      bool match = true;
      for (int32_t i = 0; i < n && match; ++i) match = context[start + i] == context[len - n + i];
      if (!match) continue;
      std::vector<int64_t> out;
      for (int64_t j = start + n; j < len && static_cast<int32_t>(out.size()) < k; ++j) {
        out.push_back(context[j]);
      }
      return out;
    }
  }
  return {};
}

}  // namespace tlt::rollout
