// A model-free drafter: finds the most recent earlier occurrence of the context's last n tokens
// (n from max_n down to 1) and proposes the tokens that followed it. Costs no forward pass;
// strong on repetitive text (lists, restated numbers, copied prompt spans).
#pragma once

#include <cstdint>
#include <vector>

namespace tlt::rollout {

// Up to `k` proposed next tokens after `context` (empty when no n-gram of length >= min_n recurs).
std::vector<int64_t> ngram_propose(const std::vector<int64_t>& context, int32_t k,
                                   int32_t max_n = 4, int32_t min_n = 1);

}  // namespace tlt::rollout
