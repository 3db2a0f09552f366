// Copied drafts (EngineOptions::ngram_shortcut): a request whose last `shortcut` tokens (or
// more, up to 4) occurred before copies the tokens that followed then as its draft, in place of
// a drafter arm's. A repeating stretch (a restated number, a loop) costs no drafter forward and
// is usually right; when every request of the batch has a copy the drafter does not run at all.
// Copies are deterministic drafts, verified by sampling at each node.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/rollout/active_request.h"
#include "runtime/rollout/draft_source.h"

namespace tlt::rollout {

// Per request of `batch`, the draft it can copy from its own context, at most `longest` tokens
// (the most any drafter arm verifies beyond the pending token). Empty where none matches; all
// empty when `shortcut` <= 0 or `longest` == 0.
std::vector<std::vector<int64_t>> copyable_drafts(const std::vector<ActiveRequest>& batch,
                                                  int32_t shortcut, int32_t longest);

// Cuts each copy to `max_tokens` (the arm's verified tokens less the root); returns how many
// requests have one.
int64_t fit_copies(std::vector<std::vector<int64_t>>* copies, int32_t max_tokens);

// Replaces the draft of every request with a copy by that copy (a chain below its pending
// token). `drafts` may be shorter than `batch` (the drafter did not run): it is filled up.
void overlay_copies(const std::vector<ActiveRequest>& batch,
                    const std::vector<std::vector<int64_t>>& copies, std::vector<Draft>* drafts);

}  // namespace tlt::rollout
