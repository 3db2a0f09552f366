// A token bucket that reserves ahead (see rate_limiter.h).
#include "kube/rate_limiter.h"

#include <algorithm>

namespace tlt::kube {

TokenBucket::TokenBucket(double qps, int burst, Clock* clock)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(clock),
      tokens_(std::max(1, burst)),
      updated_(clock->now()) {}

Clock::Duration TokenBucket::acquire() {
  if (qps_ <= 0) return Clock::Duration::zero();
  Clock::Duration wait = Clock::Duration::zero();
  {
    std::lock_guard<std::mutex> lock(mu_);
    Clock::TimePoint now = clock_->now();
    if (now > updated_) {
      double gained = std::chrono::duration<double>(now - updated_).count() * qps_;
      tokens_ = std::min(burst_, tokens_ + gained);
      updated_ = now;
    }
    tokens_ -= 1;
    if (tokens_ < 0) {
      wait = std::chrono::round<Clock::Duration>(std::chrono::duration<double>(-tokens_ / qps_));
    }
  }
  // Sleep outside the lock: the token is reserved, and later callers reserve after it.
  clock_->sleep_for(wait);
  return wait;
}

}  // namespace tlt::kube
