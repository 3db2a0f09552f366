// The arm selector's trials, values, exploration and pooling (selector.h). The floor under a
// reference arm is in selector_floor.cc, P(b) in plain_cost.cc, the ratio estimates in
// arm_stats.cc.
#include "runtime/rollout/selector.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tlt::rollout {

ArmSelector::ArmSelector(Options o)
    : buckets_(std::move(o.buckets)),
      n_arms_(o.n_arms),
      epsilon_(o.epsilon),
      window_(static_cast<size_t>(o.window)),
      min_samples_(static_cast<size_t>(std::max(1, std::min(o.min_samples, o.window)))),
      contexts_(std::max(1, o.contexts)),
      value_(o.value),
      explore_(o.explore),
      reference_(o.reference >= 0 && o.reference < o.n_arms ? o.reference : -1),
      rng_(o.seed),
      steps_(buckets_.size() * size_t(contexts_), std::vector<std::deque<Step>>(o.n_arms)),
      estimates_(steps_.size() * size_t(o.n_arms)),
      cells_(steps_.size()) {}

bool ArmSelector::parse_value(const std::string& name, Value* out) {
  if (name == "throughput") {
    *out = Value::kThroughput;
  } else if (name == "median") {
    *out = Value::kMedianRate;
  } else {
    return false;
  }
  return true;
}

bool ArmSelector::parse_explore(const std::string& name, Explore* out) {
  if (name == "uniform") {
    *out = Explore::kUniform;
  } else if (name == "weighted") {
    *out = Explore::kWeighted;
  } else {
    return false;
  }
  return true;
}

int32_t ArmSelector::cell_of(int64_t batch_size, int32_t context) const {
  return bucket_of(batch_size) * contexts_ + std::clamp(context, 0, contexts_ - 1);
}

int32_t ArmSelector::bucket_of(int64_t batch_size) const {
  int32_t b = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (batch_size >= buckets_[i]) b = static_cast<int32_t>(i);
  }
  return b;
}

std::vector<ArmSelector::Step> ArmSelector::counted(int32_t cell, int32_t arm) const {
  const std::deque<Step>& steps = steps_[cell][arm];
  if (value_ == Value::kMedianRate) return {steps.begin(), steps.end()};
  return without_slow(steps);
}

double ArmSelector::plain_seconds_per_token(int64_t batch_size) const {
  return reference_ < 0 ? -1.0 : plain_.seconds_per_token(batch_size);
}

bool ArmSelector::needs_calibration(int64_t batch_size) const {
  return reference_ >= 0 && plain_.needs_calibration(batch_size);
}

double ArmSelector::worth(const Step& s) const {
  double p = plain_seconds_per_token(s.batch);
  return p > 0 ? s.tokens * p : s.tokens;
}

bool ArmSelector::decomposed() const {
  return value_ == Value::kThroughput && reference_ >= 0 && !plain_.empty();
}

ArmSelector::Estimate ArmSelector::estimate(int32_t cell, int32_t arm) const {
  Estimate& e = estimates_[size_t(cell) * size_t(n_arms_) + size_t(arm)];
  if (e.generation == generation_) return e;
  e = Estimate();
  e.generation = generation_;
  int32_t bucket = cell / contexts_, context = cell % contexts_;
  std::vector<std::pair<double, double>> accepted, cost;  // (tokens, b), (seconds, T(b))
  for (int32_t c = 0; c < int32_t(steps_.size()); ++c) {
    bool same_context = c % contexts_ == context, same_bucket = c / contexts_ == bucket;
    if (!same_context && !same_bucket) continue;
    for (const Step& s : counted(c, arm)) {
      if (same_context) accepted.push_back({s.tokens, double(s.batch)});
      if (same_bucket)
        cost.push_back({s.seconds, plain_seconds_per_token(s.batch) * double(s.batch)});
    }
  }
  Ratio a = ratio_of(accepted), c = ratio_of(cost);
  e.accept_steps = a.n;
  e.cost_steps = c.n;
  if (a.value < 0 || c.value <= 0) return e;
  e.accept = a.value;
  Ratio q = quotient(a, c);  // value = acceptance / cost, its error by the delta method
  e.value = q.value;
  e.error = q.error;
  return e;
}

bool ArmSelector::needs_trial(int32_t cell, int32_t arm) const {
  if (!decomposed()) return steps_[cell][arm].size() < min_samples_;
  Estimate e = estimate(cell, arm);
  return e.accept_steps < min_samples_ || e.cost_steps < std::min(min_samples_, kCostSteps);
}

double ArmSelector::value(int32_t cell, int32_t arm) const {
  if (decomposed()) return estimate(cell, arm).value;
  const std::deque<Step>& steps = steps_[cell][arm];
  if (steps.empty()) return -1.0;
  if (value_ == Value::kMedianRate) {
    std::vector<double> v;
    v.reserve(steps.size());
    for (const Step& s : steps) v.push_back(worth(s) / s.seconds);
    return median_of(std::move(v));
  }
  return ratio_of(worth_pairs(cell, arm)).value;
}

std::vector<std::pair<double, double>> ArmSelector::worth_pairs(int32_t cell, int32_t arm) const {
  std::vector<std::pair<double, double>> pairs;
  for (const Step& s : counted(cell, arm)) pairs.push_back({worth(s), s.seconds});
  return pairs;
}

// Around value(): the ratio estimate's own, or the median rate.
double ArmSelector::standard_error(int32_t cell, int32_t arm) const {
  if (decomposed()) return estimate(cell, arm).error;
  return ratio_of(worth_pairs(cell, arm), value(cell, arm)).error;
}

int32_t ArmSelector::best(int32_t cell) const {
  if (reference_ >= 0) return best_bounded(cell);
  int32_t best = 0;
  double best_value = -2.0;
  for (int32_t i = 0; i < n_arms_; ++i) {  // not explored enough yet, from the trial offset on
    int32_t a = (i + trial_offset_) % n_arms_;
    if (steps_[cell][a].size() < min_samples_) return a;
  }
  for (int32_t a = 0; a < n_arms_; ++a) {
    double v = value(cell, a);
    if (v > best_value) best_value = v, best = a;
  }
  return best;
}

int32_t ArmSelector::choose(int64_t batch_size, int32_t context) {
  int32_t cell = cell_of(batch_size, context);
  if (reference_ >= 0) return choose_bounded(batch_size, cell);
  if (n_arms_ > 1 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < epsilon_) {
    ++explorations_;
    return explore(cell);
  }
  return best(cell);
}

int32_t ArmSelector::explore(int32_t cell) {
  if (explore_ == Explore::kUniform)
    return std::uniform_int_distribution<int32_t>(0, n_arms_ - 1)(rng_);
  // Each arm weighs its value relative to the best one's. An arm without min_samples steps yet
  // (which best() returns first anyway) weighs as much as the best.
  std::vector<double> values(size_t(n_arms_), -1.0);  // -1: not min_samples steps yet
  for (int32_t a = 0; a < n_arms_; ++a)
    if (steps_[cell][a].size() >= min_samples_) values[size_t(a)] = std::max(value(cell, a), 0.0);
  double top = *std::max_element(values.begin(), values.end());
  std::vector<double> weights(size_t(n_arms_), 1.0);
  for (size_t a = 0; a < values.size(); ++a)
    if (values[a] >= 0.0 && top > 0.0) weights[a] = values[a] / top;
  std::discrete_distribution<int32_t> pick(weights.begin(), weights.end());
  return pick(rng_);
}

void ArmSelector::report_step(int64_t batch_size, int32_t arm, double tokens, double seconds,
                              int32_t context) {
  int32_t cell = cell_of(batch_size, context);
  Step step{std::max<int64_t>(1, batch_size), tokens, std::max(seconds, 1e-9)};
  CellTotals& totals = cells_[size_t(cell)];
  // What the leader would have taken for this step's worth, at its value when it was passed over.
  double explore_cost = 0.0;
  if (totals.explored_arm == arm && totals.leader_value > 0.0)
    explore_cost = std::max(0.0, seconds - worth(step) / totals.leader_value);
  totals.explored_arm = -1;
  count(cell, arm, step, explore_cost);
  if (keep_)
    kept_.push_back(
        {step.batch, arm, std::clamp(context, 0, contexts_ - 1), tokens, seconds, explore_cost});
}

bool ArmSelector::absorb(const Observation& o) {
  if (o.arm < 0 || o.arm >= n_arms_ || o.context < 0 || o.context >= contexts_ ||
      !(o.seconds > 0.0) || !std::isfinite(o.seconds) || !std::isfinite(o.tokens) ||
      !(o.explore_cost >= 0.0) || !std::isfinite(o.explore_cost))
    return false;
  Step step{std::max<int64_t>(1, o.batch_size), o.tokens, o.seconds};
  count(cell_of(step.batch, o.context), o.arm, step, o.explore_cost);
  return true;
}

void ArmSelector::count(int32_t cell, int32_t arm, const Step& step, double explore_cost) {
  CellTotals& totals = cells_[size_t(cell)];
  totals.seconds += step.seconds;
  totals.explore_cost += explore_cost;
  ++generation_;
  std::deque<Step>& r = steps_[cell][arm];
  r.push_back(step);
  while (r.size() > window_) r.pop_front();
  if (arm == reference_) plain_.add(step);
}

}  // namespace tlt::rollout
