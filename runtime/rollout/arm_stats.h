// Interval statistics for the arm selector (selector.h): the steps a bandit counts, ratio
// estimates with their standard errors, and the outlier rule. An arm's value is a ratio of sums
// over its recent steps (tokens over seconds, or acceptance over cost); its confidence interval is
// that value plus or minus ArmSelector::kZ standard errors.
//
// Thread safety: stateless functions over values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <utility>
#include <vector>

namespace tlt::rollout {

// One step as the bandit counts it: over `batch` (>= 1) active requests, `tokens` emitted in
// `seconds` (> 0) of wall time.
struct ArmStep {
  int64_t batch;
  double tokens, seconds;
};

// A ratio estimate R = sum(x) / sum(y) over pairs (x_i, y_i) and its standard error. value is -1
// without pairs or when sum(y) <= 0; error is infinity below two pairs; n counts the pairs.
struct Ratio {
  double value = -1.0, error = std::numeric_limits<double>::infinity();
  size_t n = 0;
};

// R = sum(x) / sum(y) and its standard error sqrt(sum((x_i - C y_i)^2) / (n - 1) * n) / sum(y)
// around C: R itself, unless `center` >= 0 is given (the median rate's interval is taken around
// the median).
Ratio ratio_of(const std::vector<std::pair<double, double>>& pairs, double center = -1.0);

// The quotient a / c of two ratio estimates (value = a.value / c.value) with its standard error by
// the delta method, treating a and c as independent; infinity when either error is. Requires
// a.value >= 0 and c.value > 0; n is left 0.
Ratio quotient(const Ratio& a, const Ratio& c);

// The upper median of `v` (the element at index size / 2 once sorted); `v` must not be empty.
double median_of(std::vector<double> v);

// `steps` less those slower than 4x their median time: one-off costs (an allocation, a drafter
// catching up) that say nothing about the arm's steady rate. The median step itself always stays,
// so a non-empty input gives a non-empty output; order is kept.
std::vector<ArmStep> without_slow(const std::deque<ArmStep>& steps);

}  // namespace tlt::rollout
