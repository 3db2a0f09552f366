// Per-phase timing for the rollout engine's profile (EngineStats::phases, engine.h). Internal to
// runtime/rollout; header-only.
//
// A PhaseClock charges the wall time of its scope to one phase, less whatever the other phases
// were charged meanwhile (a nested clock's scope), so the phases never overlap and nesting needs
// no bookkeeping: a plain step's clock leaves out the hidden-state capture inside it.
//
// Thread safety: the engine's one thread.
#pragma once

#include <chrono>

#include "runtime/rollout/engine.h"

namespace tlt::rollout {

inline double phase_now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

class PhaseClock {
 public:
  // `into` is one of `phases`' fields; both are borrowed and outlive the clock.
  PhaseClock(double* into, const EnginePhases* phases)
      : into_(into), phases_(phases), start_(phase_now_seconds()), claimed_(phases->sum()) {}
  ~PhaseClock() {
    double nested = phases_->sum() - claimed_;
    *into_ += phase_now_seconds() - start_ - nested;
  }
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

 private:
  double* into_;
  const EnginePhases* phases_;
  double start_, claimed_;
};

}  // namespace tlt::rollout
