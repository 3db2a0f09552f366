// The paired comparison that says whether RL improved a policy on held-out problems.
//
// Before and after are each problem's mean reward, from evaluations on the same problems with
// the same sampling seeds (runtime/rl/evaluation.h), so the comparison is paired by problem:
// d_i = after_i - before_i. The 95% interval of mean(d) is the normal approximation
// mean(d) +- 1.96 * sd(d) / sqrt(n) (sd with Bessel's correction); with n >= 64 problems and
// d_i in [-1, 1] the central limit theorem makes it close to a paired bootstrap's.
//
// Nothing here depends on two runs producing the same floats: a run compares its own before and
// after, so a machine with other floats draws another sample of the same comparison.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "api/status.h"

namespace tlt::rl {

struct PairedDifference {
  int64_t n = 0;        // pairs (problems)
  double before = 0.0;  // mean of `before`
  double after = 0.0;   // mean of `after`
  double mean = 0.0;    // mean of after - before
  double lo = 0.0;      // 95% interval of the mean difference
  double hi = 0.0;
  bool improved() const { return lo > 0.0; }  // the interval lies above zero
};

// The paired difference after - before over problems. InvalidArgument when the two have
// different lengths or fewer than 2 pairs (no spread to estimate).
StatusOr<PairedDifference> paired_difference(const std::vector<double>& before,
                                             const std::vector<double>& after);

}  // namespace tlt::rl
