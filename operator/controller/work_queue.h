// A rate-limited work queue of reconcile keys, after client-go's workqueue:
//   - a key is queued at most once however often it is added (dedup);
//   - a key is handed to one worker at a time: added while being processed, it is queued again
//     when the worker calls done();
//   - add_rate_limited() delays a key by the larger of its own exponential backoff
//     (base * 2^failures, capped) and a global token bucket (qps, burst) shared by all keys;
//     forget() resets the key's backoff after a success.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace tlt::controller {

using SteadyTime = std::chrono::steady_clock::time_point;
using Duration = std::chrono::steady_clock::duration;

struct RateLimitOptions {
  Duration base_delay = std::chrono::milliseconds(5);  // first retry of a failing key
  Duration max_delay = std::chrono::seconds(300);      // backoff cap per key
  double qps = 20;                                     // global refill rate of the bucket
  int burst = 200;                                     // bucket size
};

// The delay arithmetic of the queue, on times it is given (so tests need no sleeping).
// Not thread-safe: the queue guards it.
class RateLimiter {
 public:
  explicit RateLimiter(RateLimitOptions options);

  // The delay before `key` may run again, counting one more failure of it, and taking one token
  // from the bucket at `now` (a token taken in advance when the bucket is empty).
  Duration when(const std::string& key, SteadyTime now);
  // Clears the backoff of `key`.
  void forget(const std::string& key) { failures_.erase(key); }
  // Failures of `key` since the last forget().
  int failures(const std::string& key) const;

 private:
  const RateLimitOptions options_;
  std::map<std::string, int> failures_;
  double tokens_;
  SteadyTime last_;
  bool started_ = false;
};

class WorkQueue {
 public:
  explicit WorkQueue(RateLimitOptions options = {});
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` now (no-op when it is already queued).
  void add(const std::string& key);
  // Queues `key` after `delay`; an earlier pending time for the key wins.
  void add_after(const std::string& key, Duration delay);
  // Queues `key` after its rate-limited delay (see the top).
  void add_rate_limited(const std::string& key);
  // Resets `key`'s backoff (call after a successful reconcile).
  void forget(const std::string& key);
  int failures(const std::string& key) const;

  // Blocks until a key is ready and hands it out (the caller must call done(key)). Returns false
  // once shut_down() was called.
  bool get(std::string* key);
  void done(const std::string& key);
  // Wakes every get() with false; later adds are dropped.
  void shut_down();

  // Keys queued and ready now (not counting delayed ones or ones being processed).
  size_t depth() const;
  // Keys waiting for a delay.
  size_t delayed() const;

 private:
  void add_locked(const std::string& key);
  void promote_ready_locked(SteadyTime now);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;              // guarded by mu_
  std::set<std::string> dirty_;                // queued (or to be requeued); guarded by mu_
  std::set<std::string> processing_;           // handed out; guarded by mu_
  std::map<std::string, SteadyTime> waiting_;  // delayed keys; guarded by mu_
  RateLimiter limiter_;                        // guarded by mu_
  bool shut_down_ = false;                     // guarded by mu_
};

}  // namespace tlt::controller
