#include "runtime/rollout/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

namespace tlt::rollout {

// Sampling runs for every sampled token and every drafted one, over the whole vocabulary, so its
// loops work on 4 doubles at a time (GCC vector extensions). The results must not depend on the
// machine (a request's tokens are a function of its seed): every operation below is IEEE
// elementwise and spelled out (no library exp in the vector loops), and the file is compiled
// without fused multiply-adds (runtime/CMakeLists.txt), so each target_clones variant and the
// scalar remainders compute the same bits. The exception is std::log for the few race candidates
// (race_scan), whose last bit may differ between C libraries: a draw could differ only where two
// candidates' race values lie within that bit of each other.
namespace {

constexpr int64_t kW = 4;
typedef double V4d __attribute__((vector_size(kW * sizeof(double))));
typedef int64_t V4i __attribute__((vector_size(kW * sizeof(int64_t))));
typedef uint64_t V4u __attribute__((vector_size(kW * sizeof(uint64_t))));
typedef float V4f __attribute__((vector_size(kW * sizeof(float))));

#if defined(__x86_64__) && defined(__GNUC__)
#define TLT_SAMPLING_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TLT_SAMPLING_CLONES
#endif
// Bodies shared by the float and double entry points: inlined into each clone, so they are
// compiled for its instruction set.
#define TLT_SAMPLING_INLINE inline __attribute__((always_inline))

TLT_SAMPLING_INLINE V4d load4(const double* p) {
  V4d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// Four floats widened to doubles (exactly).
TLT_SAMPLING_INLINE V4d load4(const float* p) {
  V4f v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, V4d);
}
TLT_SAMPLING_INLINE void store4(double* p, V4d v) {
  std::memcpy(p, &v, sizeof v);
}

template <class To, class From>
TLT_SAMPLING_INLINE To bits_as(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &x, sizeof t);
  return t;
}

// Elementwise conversion between scalars or between vectors of the same width.
template <class To, class From>
TLT_SAMPLING_INLINE To convert(From x) {
  if constexpr (std::is_arithmetic_v<From>) {
    return static_cast<To>(x);
  } else {
    return __builtin_convertvector(x, To);
  }
}

// exp(x) for x <= 0 in double precision (relative error ~1e-16), and 0 below -708 (where the
// value would be subnormal, ~1e-308 of the likeliest token's weight): x = n ln2 + r with
// |r| <= ln2 / 2 (ln2 split in two so that n * ln2's high part is exact), exp(r) by its Taylor
// series to degree 13, 2^n from exponent bits. F is double or V4d and I the matching int64_t or
// V4i: the scalar remainder and the vectors perform the same operations.
template <class F, class I>
TLT_SAMPLING_INLINE F exp_nonpositive(F x) {
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  F y = x < -708.0 ? F{} - 708.0 : x;
  I n = convert<I>(y * 1.4426950408889634 - 0.5);  // round(y / ln2), toward zero at halves
  F nf = convert<F>(n);
  F r = (y - nf * kLn2Hi) - nf * kLn2Lo;
  F p = F{} + 1.0 / 6227020800.0;  // 1/13!, then 1/12!, ..., 1/1!, 1/0!
  for (double c :
       {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
        1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0})
    p = p * r + c;
  F two_n = bits_as<F>(I((n + 1023) << 52));
  return x < -708.0 ? F{} : p * two_n;
}

// U_i of race(): the double in [1, 2) whose 52 mantissa bits are the top of z, minus 1, plus
// half a step, so in (0, 1) and exact. U is uint64_t or V4u, D the matching double or V4d.
template <class D, class U>
TLT_SAMPLING_INLINE D unit_of(U z) {
  return (bits_as<D>(U((z >> 12) | 0x3ff0000000000000ull)) - 1.0) + 0x1.0p-53;
}

// SplitMix64's output for state `key + (i + 1) * gamma`.
template <class U>
TLT_SAMPLING_INLINE U race_hash(uint64_t key, U i) {
  U z = key + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The largest of x[0, v) (NaNs aside), v >= 1. T is float or double.
template <class T>
TLT_SAMPLING_INLINE double max_body(const T* x, int64_t v) {
  int64_t i = 0;
  double m = x[0];
  if (v >= kW) {
    V4d mv = load4(x);
    for (i = kW; i + kW <= v; i += kW) {
      V4d xv = load4(x + i);
      mv = xv > mv ? xv : mv;
    }
    for (int j = 0; j < kW; ++j) m = std::max(m, mv[j]);
  }
  for (; i < v; ++i) m = std::max(m, double(x[i]));
  return m;
}
TLT_SAMPLING_CLONES double max_of(const float* x, int64_t v) {
  return max_body(x, v);
}
TLT_SAMPLING_CLONES double max_of(const double* x, int64_t v) {
  return max_body(x, v);
}

// p[i] = exp((logits[i] - max) / temperature); returns their sum (added in a fixed order). Four
// vectors at a time, so that their exponentials' dependency chains overlap. T is float or double
// (widened exactly, so float logits give the bits their doubles would).
template <class T>
TLT_SAMPLING_INLINE double fill_exp_body(const T* logits, int64_t v, double max, double temperature,
                                         double* p) {
  V4d acc[4] = {};
  int64_t i = 0;
  for (; i + 4 * kW <= v; i += 4 * kW) {
    V4d e[4];
    for (int j = 0; j < 4; ++j)
      e[j] = exp_nonpositive<V4d, V4i>((load4(logits + i + j * kW) - max) / temperature);
    for (int j = 0; j < 4; ++j) store4(p + i + j * kW, e[j]), acc[j] = acc[j] + e[j];
  }
  V4d total = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  double sum = (total[0] + total[1]) + (total[2] + total[3]);
  for (; i < v; ++i)
    sum += p[i] = exp_nonpositive<double, int64_t>((double(logits[i]) - max) / temperature);
  return sum;
}
TLT_SAMPLING_CLONES double fill_exp(const float* logits, int64_t v, double max, double temperature,
                                    double* p) {
  return fill_exp_body(logits, v, max, temperature, p);
}
TLT_SAMPLING_CLONES double fill_exp(const double* logits, int64_t v, double max, double temperature,
                                    double* p) {
  return fill_exp_body(logits, v, max, temperature, p);
}

TLT_SAMPLING_CLONES void scale(double* p, int64_t v, double sum) {
  for (int64_t i = 0; i < v; ++i) p[i] /= sum;
}

// The race's scan (see race()): indices whose U_i could still beat `bar` get a logarithm. Index
// j's uniform is keyed by ids[j] when ids is given, else by j.
template <bool kIds>
TLT_SAMPLING_INLINE int64_t race_scan_body(const double* probs, const int64_t* ids, int64_t v,
                                           uint64_t key, int64_t best, double bar) {
  // Margin 2^-50: the threshold 1 + bar * p_i is rounded; never skip an index that could win.
  auto consider = [&](int64_t i, double u) {
    double p = probs[i];
    if (p <= 0.0 || u <= (1.0 + bar * p) - 0x1.0p-50) return;
    double s = std::log(u) / p;
    if (s > bar) bar = s, best = i;
  };
  int64_t i = 0;
  const V4u lane = {0, 1, 2, 3};
  for (; i + kW <= v; i += kW) {
    V4d p = load4(probs + i);
    V4u at = lane + uint64_t(i);
    if constexpr (kIds) std::memcpy(&at, ids + i, sizeof at);
    V4d u = unit_of<V4d>(race_hash<V4u>(key, at));
    V4i maybe = (p > 0.0) & (u > (1.0 + bar * p) - 0x1.0p-50);
    if (!(maybe[0] | maybe[1] | maybe[2] | maybe[3])) continue;
    for (int j = 0; j < kW; ++j) consider(i + j, u[j]);
  }
  for (; i < v; ++i)
    consider(i, unit_of<double>(race_hash<uint64_t>(key, uint64_t(kIds ? ids[i] : i))));
  return best;
}
TLT_SAMPLING_CLONES int64_t race_scan(const double* probs, int64_t v, uint64_t key, int64_t best,
                                      double bar) {
  return race_scan_body<false>(probs, nullptr, v, key, best, bar);
}
TLT_SAMPLING_CLONES int64_t race_scan(const double* probs, const int64_t* ids, int64_t v,
                                      uint64_t key, int64_t best, double bar) {
  return race_scan_body<true>(probs, ids, v, key, best, bar);
}

template <class T>
int64_t argmax_body(const T* logits, int64_t v) {
  double top = max_of(logits, v);
  for (int64_t i = 0; i < v; ++i) {
    if (double(logits[i]) == top) return i;
  }
  return 0;  // NaNs only
}

template <class T>
std::vector<double> sampling_probs_body(const T* logits, int64_t v, const SamplingParams& params) {
  std::vector<double> p(v);
  double max = max_of(logits, v);
  scale(p.data(), v, fill_exp(logits, v, max, params.temperature, p.data()));
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

}  // namespace

int64_t argmax(const float* logits, int64_t v) {
  return argmax_body(logits, v);
}
int64_t argmax(const double* logits, int64_t v) {
  return argmax_body(logits, v);
}

std::vector<double> sampling_probs(const float* logits, int64_t v, const SamplingParams& params) {
  return sampling_probs_body(logits, v, params);
}
std::vector<double> sampling_probs(const double* logits, int64_t v, const SamplingParams& params) {
  return sampling_probs_body(logits, v, params);
}

int64_t sample(const std::vector<double>& probs, Rng& rng) {
  return race(probs, rng.key());
}

double race_uniform(uint64_t key, int64_t i) {
  return unit_of<double>(race_hash<uint64_t>(key, uint64_t(i)));
}

std::vector<double> race_values(const std::vector<double>& probs, uint64_t key,
                                const int64_t* ids) {
  std::vector<double> out(probs.size(), std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0)
      out[i] = -std::log(race_uniform(key, ids ? ids[i] : int64_t(i))) / probs[i];
  }
  return out;
}

namespace {

// race() over index j's uniform keyed by ids[j], or by j when ids is null.
int64_t race_keyed(const std::vector<double>& probs, uint64_t key, const int64_t* ids) {
  // The winner maximises s_i = log(U_i) / p_i (= -E_i / p_i). Start from the likeliest index:
  // its s sets a bar that almost no other index passes. Since log u <= u - 1, an index with
  // U_i <= 1 + bar * p_i has s_i <= bar, so only the rare U_i above that need a logarithm. Ties
  // (s_i == bar) keep the index found first.
  int64_t v = int64_t(probs.size());
  double top = max_of(probs.data(), v);
  int64_t best = int64_t(std::find(probs.begin(), probs.end(), top) - probs.begin());
  double bar = std::log(race_uniform(key, ids ? ids[best] : best)) / top;
  return ids ? race_scan(probs.data(), ids, v, key, best, bar)
             : race_scan(probs.data(), v, key, best, bar);
}

}  // namespace

int64_t race(const std::vector<double>& probs, uint64_t key) {
  return race_keyed(probs, key, nullptr);
}

int64_t race(const std::vector<double>& probs, uint64_t key, const int64_t* ids) {
  return race_keyed(probs, key, ids);
}

}  // namespace tlt::rollout
