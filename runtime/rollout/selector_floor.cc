// The floor under the reference arm (selector.h, "The floor"): trials that start with the
// reference and skip arms ruled out, exploitation that leaves the reference only for an arm
// probably not slower than it, and exploration within a budget.
#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "runtime/rollout/selector.h"

namespace tlt::rollout {

// A step of `arm` emits about accept * b tokens, worth E = accept * b * P(b) plain seconds; it
// takes E / value(arm) seconds where the leader would take E / value(leader).
double ArmSelector::expected_explore_cost(int64_t batch_size, int32_t cell, int32_t arm,
                                          int32_t leader) const {
  if (!decomposed()) return 0.0;
  Estimate e = estimate(cell, arm);
  double lead = value(cell, leader), p = plain_seconds_per_token(batch_size);
  if (e.value <= 0 || lead <= 0 || p <= 0) return 0.0;
  double worth = e.accept * double(batch_size) * p;
  return std::max(0.0, worth / e.value - worth / lead);
}

bool ArmSelector::ruled_out(int32_t cell, int32_t arm) const {
  double upper = value(cell, arm) + kZ * standard_error(cell, arm);
  for (int32_t a = 0; a < n_arms_; ++a) {
    if (a == arm || value(cell, a) < 0) continue;
    if (value(cell, a) - kZ * standard_error(cell, a) > upper) return true;
  }
  return false;
}

int32_t ArmSelector::best_bounded(int32_t cell) const {
  // Trial order: the reference, then the others from the trial offset on; an arm ruled out
  // skips its round.
  int32_t others = n_arms_ - 1;
  for (int32_t i = -1; i < others; ++i) {
    int32_t k = i < 0 ? 0 : (i + trial_offset_) % others;  // the k-th arm besides the reference
    int32_t a = i < 0 ? reference_ : k + (k >= reference_ ? 1 : 0);
    if (needs_trial(cell, a) && !ruled_out(cell, a)) return a;
  }
  // An arm displaces plain when it looks faster and, one standard error down, loses at most
  // kTolerance to it; among those, the best pessimistic value wins.
  int32_t best = reference_;
  double plain = value(cell, reference_);
  double best_value = -std::numeric_limits<double>::infinity();
  for (int32_t a = 0; a < n_arms_; ++a) {
    double v = value(cell, a), pessimistic = v - standard_error(cell, a);
    if (a == reference_ || v <= plain || pessimistic < (1.0 - kTolerance) * plain) continue;
    if (pessimistic > best_value) best_value = pessimistic, best = a;
  }
  return best;
}

int32_t ArmSelector::choose_bounded(int64_t batch_size, int32_t cell) {
  CellTotals& totals = cells_[size_t(cell)];
  totals.explored_arm = -1;
  if (needs_calibration(batch_size)) return reference_;
  int32_t leader = best(cell);
  if (n_arms_ < 2 || std::uniform_real_distribution<double>(0.0, 1.0)(rng_) >= epsilon_)
    return leader;
  double budget = kExploreBudget * totals.seconds;
  if (totals.explore_cost > budget) return leader;  // spent
  std::vector<int32_t> open, others;
  for (int32_t a = 0; a < n_arms_; ++a) {
    if (a == leader) continue;
    others.push_back(a);
    if (!ruled_out(cell, a)) open.push_back(a);
  }
  if (open.empty()) {  // the verdict is known: recheck it rarely
    if (std::uniform_real_distribution<double>(0.0, 1.0)(rng_) >= kRecheck) return leader;
    open = others;
  }
  // The open arm with the highest upper bound: the likeliest to overtake the leader.
  int32_t pick = open[std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng_)];
  double top = -std::numeric_limits<double>::infinity();
  for (int32_t a : open) {
    double upper = value(cell, a) + kZ * standard_error(cell, a);
    if (upper > top) top = upper, pick = a;
  }
  if (totals.explore_cost + expected_explore_cost(batch_size, cell, pick, leader) > budget)
    return leader;  // this step alone would overspend: one recheck of a costly arm at a large
                    // batch size can cost more than a whole short tail's budget
  ++explorations_;
  totals.explored_arm = pick;
  totals.leader_value = value(cell, leader);
  return pick;
}

}  // namespace tlt::rollout
