#include "runtime/rollout/copied_drafts.h"

#include <algorithm>

#include "runtime/rollout/ngram.h"

namespace tlt::rollout {

std::vector<std::vector<int64_t>> copyable_drafts(const std::vector<ActiveRequest>& batch,
                                                  int32_t shortcut, int32_t longest) {
  std::vector<std::vector<int64_t>> out(batch.size());
  if (shortcut <= 0 || longest == 0) return out;
  int32_t min_n = shortcut, max_n = std::max(4, min_n);
  for (size_t i = 0; i < batch.size(); ++i)
    out[i] = ngram_propose(batch[i].tokens, longest, max_n, min_n);
  return out;
}

int64_t fit_copies(std::vector<std::vector<int64_t>>* copies, int32_t max_tokens) {
  int64_t n = 0;
  for (std::vector<int64_t>& c : *copies) {
    if (c.size() > size_t(max_tokens)) c.resize(size_t(max_tokens));
    n += c.empty() ? 0 : 1;
  }
  return n;
}

void overlay_copies(const std::vector<ActiveRequest>& batch,
                    const std::vector<std::vector<int64_t>>& copies, std::vector<Draft>* drafts) {
  drafts->resize(batch.size());
  for (size_t i = 0; i < batch.size() && i < copies.size(); ++i) {
    if (copies[i].empty()) continue;
    Draft d{DraftTree(batch[i].pending()), false, {}};
    int32_t at = 0;
    for (int64_t tok : copies[i]) at = d.tree.add(tok, at, 0.0);
    (*drafts)[i] = std::move(d);
  }
}

}  // namespace tlt::rollout
