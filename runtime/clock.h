// Seconds on the steady clock: the runtime's durations, deadlines and timelines. CLOCK_MONOTONIC
// on Linux, so two processes on one machine read the same clock (a worker subtracts the
// driver's `sent_at` from its own now_s()); not wall time, and not comparable across machines.
//
// Header only, no dependencies. Thread safety: safe from any thread.
#pragma once

#include <chrono>

namespace tlt::runtime {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace tlt::runtime
