// The benches' clock: seconds on a steady clock, for the differences they time.
//
// Thread safety: a pure function.
#pragma once

#include <chrono>

namespace tlt::bench {

// Seconds on a steady clock (an arbitrary origin: only differences mean anything).
inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace tlt::bench
