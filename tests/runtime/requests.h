// Seeded batches of generation requests for the rollout engine's tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/rollout/engine.h"

namespace tlt::rollout::test_support {

// n requests with prompts of 2-10 tokens below `vocab`, max_new_tokens in (max_new - 5,
// max_new], the given temperature, and per-request seeds derived from `seed`.
inline std::vector<Request> random_requests(int n, int64_t vocab, int max_new, double temperature,
                                            uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    int len = 2 + int(rng() % 9);
    for (int j = 0; j < len; ++j) r.prompt.push_back(int64_t(rng() % vocab));
    r.max_new_tokens = max_new - int(rng() % 5);
    r.sampling.temperature = temperature;
    r.seed = seed * 1000 + i;
    out.push_back(r);
  }
  return out;
}

}  // namespace tlt::rollout::test_support
