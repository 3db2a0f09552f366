#include "runtime/rollout/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tlt::rollout {

int64_t argmax(const double* logits, int64_t v) {
  int64_t best = 0;
  for (int64_t i = 1; i < v; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

std::vector<double> sampling_probs(const double* logits, int64_t v, const SamplingParams& params) {
  std::vector<double> p(v);
  double max = *std::max_element(logits, logits + v);
  double sum = 0.0;
  for (int64_t i = 0; i < v; ++i) sum += p[i] = std::exp((logits[i] - max) / params.temperature);
  for (double& x : p) x /= sum;
  if (params.top_p >= 1.0) return p;
  std::vector<int64_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  // Stable: among equal probabilities the lower index is kept first.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  double mass = 0.0;
  int64_t keep = 0;
  // 1e-12: a mass that should equal top_p may round to just below it.
  while (keep < v && mass < params.top_p - 1e-12) mass += p[order[keep++]];
  std::vector<double> out(v, 0.0);
  for (int64_t k = 0; k < keep; ++k) out[order[k]] = p[order[k]] / mass;
  return out;
}

int64_t sample(const std::vector<double>& probs, Rng& rng) {
  return inverse_cdf(probs, rng.uniform());
}

int64_t inverse_cdf(const std::vector<double>& probs, double u) {
  double c = 0.0;
  int64_t last_nonzero = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    c += probs[i];
    last_nonzero = static_cast<int64_t>(i);
    if (u < c) return last_nonzero;
  }
  return last_nonzero;  // rounding left u just above the total
}

}  // namespace tlt::rollout
