// The Kubernetes client's own rate limit: a token bucket in front of every request, as
// client-go's (flowcontrol.NewTokenBucketRateLimiter), so that one busy operator cannot flood the
// apiserver however many threads it runs.
//
// The bucket holds up to `burst` tokens and gains `qps` a second; a request takes one. When the
// bucket is empty the caller reserves the next token and sleeps until it is due, so waiting
// callers are served in the order they came, each 1/qps after the previous one.
//
// Thread safety: acquire() may be called concurrently; all callers share the one bucket.
#pragma once

#include <mutex>

#include "kube/clock.h"

namespace tlt::kube {

class TokenBucket {
 public:
  // qps <= 0: unlimited (acquire() never waits). burst < 1 counts as 1. The bucket starts full.
  // `clock` is borrowed and must outlive the bucket.
  TokenBucket(double qps, int burst, Clock* clock);
  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  // Takes a token, sleeping on the clock until one is available. Returns the time slept.
  Clock::Duration acquire();

 private:
  // Constant after construction.
  const double qps_;
  const double burst_;
  Clock* const clock_;

  std::mutex mu_;
  double tokens_;             // guarded by mu_; below 0 when tokens are reserved ahead
  Clock::TimePoint updated_;  // guarded by mu_; when tokens_ was last brought up to date
};

}  // namespace tlt::kube
