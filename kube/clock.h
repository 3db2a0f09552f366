// Monotonic time and sleeping for the Kubernetes client's retries and rate limit, behind an
// interface so unit tests neither sleep nor depend on the machine's speed.
//
// Not controller/clock.h's Clock: that one is wall time for status timestamps; this one is a
// steady clock that can also wait.
//
// Thread safety: real_clock() is stateless; FakeClock guards its state with a mutex.
#pragma once

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace tlt::kube {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::nanoseconds;

  virtual ~Clock() = default;
  virtual TimePoint now() = 0;
  // Returns after `d` has passed (at once for d <= 0).
  virtual void sleep_for(Duration d) = 0;
};

// std::chrono::steady_clock and std::this_thread::sleep_for. Process-wide, never null.
inline Clock* real_clock() {
  class RealClock : public Clock {
   public:
    TimePoint now() override { return std::chrono::steady_clock::now(); }
    void sleep_for(Duration d) override {
      if (d > Duration::zero()) std::this_thread::sleep_for(d);
    }
  };
  static RealClock clock;
  return &clock;
}

// A clock for tests: time moves only by advance() and, unless advance_on_sleep is false, by
// sleep_for(), which returns at once. Every sleep_for() with d > 0 is recorded.
class FakeClock : public Clock {
 public:
  explicit FakeClock(bool advance_on_sleep = true) : advance_on_sleep_(advance_on_sleep) {}

  TimePoint now() override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void sleep_for(Duration d) override {
    if (d <= Duration::zero()) return;
    std::lock_guard<std::mutex> lock(mu_);
    sleeps_.push_back(d);
    if (advance_on_sleep_) now_ += d;
  }
  void advance(Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }
  // The sleeps so far, in call order.
  std::vector<Duration> sleeps() {
    std::lock_guard<std::mutex> lock(mu_);
    return sleeps_;
  }

 private:
  const bool advance_on_sleep_;
  std::mutex mu_;
  TimePoint now_{std::chrono::hours(1)};  // guarded by mu_
  std::vector<Duration> sleeps_;          // guarded by mu_
};

}  // namespace tlt::kube
