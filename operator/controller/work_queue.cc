// The work queue: dedup, one worker per key, delays, and the rate limiter behind them.
#include "operator/controller/work_queue.h"

#include <algorithm>
#include <cmath>

namespace tlt::controller {

RateLimiter::RateLimiter(RateLimitOptions options)
    : options_(options), tokens_(static_cast<double>(options.burst)) {}

int RateLimiter::failures(const std::string& key) const {
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

Duration RateLimiter::when(const std::string& key, SteadyTime now) {
  // Per key: base * 2^n, capped (n counts earlier failures).
  int n = failures_[key]++;
  double scale = std::ldexp(1.0, std::min(n, 62));
  auto base = std::chrono::duration<double>(options_.base_delay);
  Duration backoff = options_.max_delay;
  if (base.count() * scale < std::chrono::duration<double>(options_.max_delay).count())
    backoff = std::chrono::duration_cast<Duration>(base * scale);
  // Global: refill since the last call, take one token, wait for it if the bucket went negative.
  if (started_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min<double>(options_.burst, tokens_ + std::max(0.0, elapsed) * options_.qps);
  }
  started_ = true;
  last_ = now;
  tokens_ -= 1;
  Duration bucket = Duration::zero();
  if (tokens_ < 0 && options_.qps > 0)
    bucket = std::chrono::duration_cast<Duration>(
        std::chrono::duration<double>(-tokens_ / options_.qps));
  return std::max(backoff, bucket);
}

WorkQueue::WorkQueue(RateLimitOptions options) : limiter_(options) {}

void WorkQueue::add_locked(const std::string& key) {
  if (shut_down_ || dirty_.count(key)) return;
  dirty_.insert(key);
  if (processing_.count(key)) return;  // done() queues it
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_.erase(key);
  add_locked(key);
}

void WorkQueue::add_after(const std::string& key, Duration delay) {
  if (delay <= Duration::zero()) return add(key);
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  SteadyTime at = std::chrono::steady_clock::now() + delay;
  auto it = waiting_.find(key);
  if (it == waiting_.end() || at < it->second) waiting_[key] = at;
  cv_.notify_all();  // a waiting get() may need to wake earlier
}

void WorkQueue::add_rate_limited(const std::string& key) {
  Duration delay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    delay = limiter_.when(key, std::chrono::steady_clock::now());
  }
  add_after(key, delay);
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  limiter_.forget(key);
}

int WorkQueue::failures(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return limiter_.failures(key);
}

void WorkQueue::promote_ready_locked(SteadyTime now) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second <= now) {
      std::string key = it->first;
      it = waiting_.erase(it);
      add_locked(key);
    } else {
      ++it;
    }
  }
}

bool WorkQueue::get(std::string* key) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (shut_down_) return false;
    promote_ready_locked(std::chrono::steady_clock::now());
    if (!queue_.empty()) break;
    if (waiting_.empty()) {
      cv_.wait(lock);
    } else {
      SteadyTime next = SteadyTime::max();
      for (const auto& [k, at] : waiting_) next = std::min(next, at);
      cv_.wait_until(lock, next);
    }
  }
  *key = queue_.front();
  queue_.pop_front();
  dirty_.erase(*key);
  processing_.insert(*key);
  return true;
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key) && !shut_down_) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::shut_down() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  cv_.notify_all();
}

size_t WorkQueue::depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t WorkQueue::delayed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

}  // namespace tlt::controller
