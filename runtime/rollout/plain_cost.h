// The plain-cost model of the arm selector (selector.h): P(b), the seconds plain decoding costs a
// token at batch size b, learned from the reference arm's ("decode plainly") own steps. The
// selector values a step of n tokens over b requests in s seconds as n * P(b) / s, its speedup
// over plain decoding at that batch size, so that steps at different batch sizes compare fairly.
//
// Rules:
//   - P(b) comes from the plain steps at b itself (the last kWindow of them, less those slower
//     than 4x their median: arm_stats.h), else from those at the nearest measured batch sizes on
//     either side (linear in b), else past the end from the two nearest on one side; always kept
//     within what a batch's cost can do: a plain step's time T(b) grows with b, and no faster
//     than b.
//   - A batch size needs calibration while no batch size within a quarter of it has
//     kCalibrationSteps plain steps: an estimate from farther away could mislead every verdict
//     at that batch size, and a plain step costs nothing against the selector's floor.
//
// Thread safety: none; the selector that owns it is used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "runtime/rollout/arm_stats.h"

namespace tlt::rollout {

class PlainCost {
 public:
  // Plain steps near a batch size before its steps are valued against plain decoding there.
  // Two: one step may carry one-off costs, and calibration steps should stay few.
  static constexpr int32_t kCalibrationSteps = 2;
  // Plain steps kept per batch size (the most recent): enough to average out timing noise,
  // few enough to follow a machine whose speed drifts.
  static constexpr size_t kWindow = 16;

  // Counts a plain step (step.batch >= 1, step.seconds > 0); every cached P(b) is recomputed.
  void add(const ArmStep& step);
  // True before the first plain step.
  bool empty() const { return steps_.empty(); }
  // P(batch_size) in seconds per token; -1 before the first plain step or for batch_size < 1.
  double seconds_per_token(int64_t batch_size) const;
  // True when no batch size within a quarter of `batch_size` has kCalibrationSteps plain steps
  // (always before the first plain step).
  bool needs_calibration(int64_t batch_size) const;

 private:
  // Seconds of a plain step at `batch` from the plain steps there; -1 without them.
  double measured_seconds(int64_t batch) const;

  std::vector<std::deque<ArmStep>> steps_;  // [batch size] -> recent plain steps
  mutable std::vector<double> cache_;       // [batch size] -> P(b); 0: not computed
};

}  // namespace tlt::rollout
