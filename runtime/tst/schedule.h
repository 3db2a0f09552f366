// The learning-rate schedule and phase plan of a TST run (and of its next-token baseline).
//
// Warmup-stable-decay: linear warmup to the peak over `warmup` steps, flat, then linear decay
// to zero over the last decay_fraction of the steps. One schedule spans both TST phases; the
// switch from superposition to recovery happens at step round(ratio * steps), which the job
// spec's validation keeps inside the stable part.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace tlt::tst {

struct Schedule {
  int64_t steps = 1000;
  int64_t warmup = 100;
  double decay_fraction = 0.2;
  double peak_lr = 1e-3;
  bool superposition = true;  // false: the plain next-token baseline
  double ratio = 0.3;
  int64_t bag = 6;

  double lr(int64_t step) const {
    if (step < warmup) return peak_lr * double(step + 1) / double(warmup);
    double decay_start = steps * (1.0 - decay_fraction);
    if (step < decay_start) return peak_lr;
    return peak_lr * std::max(0.0, (steps - step) / (steps - decay_start));
  }
  int64_t switch_step() const { return superposition ? std::llround(ratio * steps) : 0; }
  // Tokens per bag at `step`: `bag` in the superposition phase, 1 in recovery and baseline.
  int64_t bag_at(int64_t step) const { return step < switch_step() ? bag : 1; }
  std::string phase_at(int64_t step) const {
    if (!superposition) return "baseline";
    return step < switch_step() ? "superposition" : "recovery";
  }
};

}  // namespace tlt::tst
