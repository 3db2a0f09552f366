#include "runtime/rl/paired.h"

#include <cmath>

namespace tlt::rl {

StatusOr<PairedDifference> paired_difference(const std::vector<double>& before,
                                             const std::vector<double>& after) {
  if (before.size() != after.size())
    return Status::InvalidArgument("paired difference: " + std::to_string(before.size()) +
                                   " problems before but " + std::to_string(after.size()) +
                                   " after; evaluate both on the same problems");
  if (before.size() < 2)
    return Status::InvalidArgument("paired difference: needs at least 2 problems (got " +
                                   std::to_string(before.size()) + "); raise spec.task.heldOut");
  PairedDifference p;
  p.n = int64_t(before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    p.before += before[i], p.after += after[i], p.mean += after[i] - before[i];
  }
  p.before /= double(p.n), p.after /= double(p.n), p.mean /= double(p.n);
  double ss = 0.0;
  for (size_t i = 0; i < before.size(); ++i) {
    double e = after[i] - before[i] - p.mean;
    ss += e * e;
  }
  double se = std::sqrt(ss / double(p.n - 1) / double(p.n));
  p.lo = p.mean - 1.959964 * se;
  p.hi = p.mean + 1.959964 * se;
  return p;
}

}  // namespace tlt::rl
