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

// Per-request random source, seeded once, so a run is reproducible. uniform() and key() each
// consume one 64-bit output of the generator, so a request draws one value per sampled token
// whichever of the two a rule uses.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(gen_); }
  // The key of one exponential race (race()).
  uint64_t key() { return gen_(); }
  // The keys the next n calls of key() will return, without advancing this generator (what
  // coupled drafts race at: the keys the target will draw the next positions with).
  std::vector<uint64_t> next_keys(int32_t n) const {
    std::mt19937_64 copy = gen_;
    std::vector<uint64_t> keys(static_cast<size_t>(n));
    for (uint64_t& k : keys) k = copy();
    return keys;
  }

 private:
  std::mt19937_64 gen_;
};

struct SamplingParams {
  double temperature = 1.0;  // 0 means greedy
  double top_p = 1.0;        // nucleus mass in (0, 1]
  bool greedy() const { return temperature <= 0.0; }
};

// Index of the largest logit; ties go to the lowest index. logits: V values (float, as the
// rollout engine's, or double).
int64_t argmax(const float* logits, int64_t v);
int64_t argmax(const double* logits, int64_t v);

// The distribution decoding samples from: softmax(logits / temperature) restricted to the
// smallest set of most likely tokens whose mass reaches top_p, renormalised. Requires
// temperature > 0. Returns V probabilities, the same bits on every machine (weights below
// e^-708 of the likeliest token's are 0). Cost: ~3 ns per token.
std::vector<double> sampling_probs(const float* logits, int64_t v, const SamplingParams& params);
std::vector<double> sampling_probs(const double* logits, int64_t v, const SamplingParams& params);

// Draws an index from `probs` (sums to 1): race(probs, rng.key()).
int64_t sample(const std::vector<double>& probs, Rng& rng);

// The exponential race (the Gumbel-max trick): every index i with probs[i] > 0 gets an
// exponential E_i = -log U_i, with U_i uniform in (0, 1) a hash of (key, i) (race_uniform), and
// the index with the smallest E_i / probs[i] wins, so over random keys the winner is distributed
// as `probs`. Two distributions raced at the same key pick the same index with probability at
// least (1 - TV) / (1 + TV), TV their total variation distance, whatever order the indices
// come in; this is what lets a drafter predict the token a reproducible request will draw
// (draft_eagle_chain.cc). Deterministic in (probs, key), on every machine. Cost: one hash per
// index (~1 ns) and a logarithm for the few that could still win. The source (Gumbel-max,
// exponential races and their coupling bound) is cited in docs/lossless.md.
int64_t race(const std::vector<double>& probs, uint64_t key);
// race() over the tokens ids[0, n) of a subset of the vocabulary, probs[j] being token ids[j]'s
// probability (n = probs.size()): index j's uniform is race_uniform(key, ids[j]), so the winner
// is the token race() over the whole vocabulary picks when every other token has probability 0.
// Returns the index j into probs (the token is ids[j]).
int64_t race(const std::vector<double>& probs, uint64_t key, const int64_t* ids);
// U_i of race(): uniform in (0, 1) on a grid of 2^-52, from SplitMix64's output at (key, i).
double race_uniform(uint64_t key, int64_t i);
// Every index's race value E_i / probs[i] = -log(U_i) / probs[i] at `key` (U_i keyed by ids[i],
// or by i when ids is null), +infinity where probs[i] = 0: race() picks the smallest, and sorting
// by it lists the indices in the order a race would draw them without replacement. For drafting
// only (one logarithm per index; its last bit may differ between C libraries).
std::vector<double> race_values(const std::vector<double>& probs, uint64_t key,
                                const int64_t* ids = nullptr);

}  // namespace tlt::rollout
