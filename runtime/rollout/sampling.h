// Turning logits into tokens: greedy choice, temperature and top-p, and a seeded per-request RNG.
// Every decoding path (plain and speculative) goes through these functions, so greedy ties and
// sampling rules are identical in both.
//
// Thread safety: Rng is not shared between threads; the functions are pure.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tlt::rollout {

// Per-request random source, seeded once, so a run is reproducible.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(gen_); }

 private:
  std::mt19937_64 gen_;
};

struct SamplingParams {
  double temperature = 1.0;  // 0 means greedy
  double top_p = 1.0;        // nucleus mass in (0, 1]
  bool greedy() const { return temperature <= 0.0; }
};

// Index of the largest logit; ties go to the lowest index. logits: V values.
int64_t argmax(const double* logits, int64_t v);

// The distribution decoding samples from: softmax(logits / temperature) restricted to the
// smallest set of most likely tokens whose mass reaches top_p, renormalised. Requires
// temperature > 0. Returns V probabilities.
std::vector<double> sampling_probs(const double* logits, int64_t v, const SamplingParams& params);

// Draws an index from `probs` (sums to 1) by inverse CDF with one uniform draw.
int64_t sample(const std::vector<double>& probs, Rng& rng);
// The index inverse CDF picks for uniform u in [0, 1): sample() is inverse_cdf(probs, u) with
// u = rng.uniform().
int64_t inverse_cdf(const std::vector<double>& probs, double u);

}  // namespace tlt::rollout
