// Wall-clock time for status timestamps and TTLs, behind an interface so tests can set it.
//
// Thread safety: RealClock is stateless; FakeClock guards its time with a mutex.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

namespace tlt::controller {

using WallTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual WallTime now() const = 0;
};

class RealClock : public Clock {
 public:
  WallTime now() const override { return std::chrono::system_clock::now(); }
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(WallTime start) : now_(start) {}
  WallTime now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void advance(std::chrono::seconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  WallTime now_;  // guarded by mu_
};

// RFC 3339 in UTC with whole seconds, as Kubernetes writes metav1.Time: "2025-01-02T03:04:05Z".
std::string format_time(WallTime t);
// Parses what format_time writes (fractional seconds and a "Z" or "+00:00" accepted); nullopt
// for anything else.
std::optional<WallTime> parse_time(const std::string& text);

}  // namespace tlt::controller
