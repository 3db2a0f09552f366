#include "runtime/rollout/arm_stats.h"

#include <algorithm>
#include <cmath>

namespace tlt::rollout {

Ratio ratio_of(const std::vector<std::pair<double, double>>& pairs, double center) {
  Ratio r;
  r.n = pairs.size();
  double x = 0, y = 0;
  for (const auto& p : pairs) x += p.first, y += p.second;
  if (r.n == 0 || y <= 0) return r;
  r.value = x / y;
  if (r.n < 2) return r;
  double c = center >= 0 ? center : r.value, squares = 0;
  for (const auto& p : pairs) squares += (p.first - c * p.second) * (p.first - c * p.second);
  r.error = std::sqrt(squares / double(r.n - 1) * double(r.n)) / y;
  return r;
}

Ratio quotient(const Ratio& a, const Ratio& c) {
  Ratio q;
  q.value = a.value / c.value;
  q.error = q.value * std::sqrt(std::pow(a.error / a.value, 2) + std::pow(c.error / c.value, 2));
  if (!std::isfinite(q.error)) q.error = std::numeric_limits<double>::infinity();
  return q;
}

double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::vector<ArmStep> without_slow(const std::deque<ArmStep>& steps) {
  if (steps.empty()) return {};
  std::vector<double> v;
  v.reserve(steps.size());
  for (const ArmStep& s : steps) v.push_back(s.seconds);
  double slow = 4.0 * median_of(std::move(v));
  std::vector<ArmStep> out;
  for (const ArmStep& s : steps)
    if (s.seconds <= slow) out.push_back(s);  // the median step itself always stays
  return out;
}

}  // namespace tlt::rollout
