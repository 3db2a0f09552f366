#include "runtime/rollout/plain_cost.h"

#include <algorithm>
#include <cmath>

namespace tlt::rollout {

void PlainCost::add(const ArmStep& step) {
  if (steps_.size() <= size_t(step.batch)) steps_.resize(size_t(step.batch) + 1);
  std::deque<ArmStep>& p = steps_[size_t(step.batch)];
  p.push_back(step);
  while (p.size() > kWindow) p.pop_front();
  std::fill(cache_.begin(), cache_.end(), 0.0);
}

double PlainCost::measured_seconds(int64_t batch) const {
  if (batch < 1 || size_t(batch) >= steps_.size()) return -1.0;
  double tokens = 0, seconds = 0;
  for (const ArmStep& s : without_slow(steps_[size_t(batch)]))
    tokens += s.tokens, seconds += s.seconds;
  return tokens > 0 ? seconds / tokens * double(batch) : -1.0;
}

// P(b) from the plain step time T at b, else between the nearest measured batch sizes below
// (lo) and above (hi), else past the end from the two nearest on one side, kept within what a
// batch's cost can do: T grows with b, and no faster than b.
double PlainCost::seconds_per_token(int64_t batch_size) const {
  if (steps_.empty() || batch_size < 1) return -1.0;
  size_t b = size_t(batch_size);
  if (cache_.size() <= b) cache_.resize(b + 1, 0.0);
  if (cache_[b] != 0.0) return cache_[b];
  double time = measured_seconds(batch_size);
  if (time < 0) {
    // The two nearest measured batch sizes below (lo, lo2) and above (hi, hi2), with their T.
    int64_t lo = 0, lo2 = 0, hi = 0, hi2 = 0;
    double t_lo = 0, t_lo2 = 0, t_hi = 0, t_hi2 = 0;
    for (int64_t x = batch_size - 1; x >= 1 && !lo2; --x) {
      double t = measured_seconds(x);
      if (t > 0) (lo ? lo2 : lo) = x, (lo2 ? t_lo2 : t_lo) = t;
    }
    for (int64_t x = batch_size + 1; x < int64_t(steps_.size()) && !hi2; ++x) {
      double t = measured_seconds(x);
      if (t > 0) (hi ? hi2 : hi) = x, (hi2 ? t_hi2 : t_hi) = t;
    }
    double at = double(batch_size);
    if (lo && hi) {
      time = t_lo + (t_hi - t_lo) * (at - double(lo)) / double(hi - lo);
    } else if (hi) {  // below every measured batch size: T(hi) * b / hi <= T(b) <= T(hi)
      double low = t_hi * at / double(hi), high = t_hi;
      time = hi2 ? std::clamp(t_hi - (t_hi2 - t_hi) / double(hi2 - hi) * double(hi - batch_size),
                              low, high)
                 : (low + high) / 2;
    } else if (lo) {  // above every measured one: T(lo) <= T(b) <= T(lo) * b / lo
      double low = t_lo, high = t_lo * at / double(lo);
      time = lo2 ? std::clamp(t_lo + (t_lo - t_lo2) / double(lo - lo2) * double(batch_size - lo),
                              low, high)
                 : (low + high) / 2;
    } else {
      return -1.0;
    }
  }
  cache_[b] = time / double(batch_size);
  return cache_[b];
}

bool PlainCost::needs_calibration(int64_t batch_size) const {
  double reach = double(batch_size) / 4.0;
  int64_t from = std::max<int64_t>(1, int64_t(std::ceil(double(batch_size) - reach)));
  int64_t to = std::min<int64_t>(int64_t(steps_.size()) - 1, int64_t(double(batch_size) + reach));
  for (int64_t x = from; x <= to; ++x)
    if (steps_[size_t(x)].size() >= size_t(kCalibrationSteps)) return false;
  return true;
}

}  // namespace tlt::rollout
