// Seeds derived from seeds: one mixing function, so every RL component that needs "a seed for
// item i of run s" (a rollout request, a warm start's generation) draws the same way.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>

namespace tlt::rl {

// A well-spread 64-bit seed from (a, b) (a splitmix64-style finaliser); deterministic.
inline uint64_t mix_seeds(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
  return x;
}

}  // namespace tlt::rl
