#include "runtime/rollout/selector.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tlt::rollout {

ArmSelector::ArmSelector(std::vector<int32_t> buckets, int32_t n_arms, double epsilon,
                         int32_t window, uint64_t seed, int32_t min_samples, int32_t contexts,
                         Value value, Explore explore, int32_t reference)
    : buckets_(std::move(buckets)),
      n_arms_(n_arms),
      epsilon_(epsilon),
      window_(static_cast<size_t>(window)),
      min_samples_(static_cast<size_t>(std::max(1, std::min(min_samples, window)))),
      contexts_(std::max(1, contexts)),
      value_(value),
      explore_(explore),
      reference_(reference >= 0 && reference < n_arms ? reference : -1),
      rng_(seed),
      steps_(buckets_.size() * size_t(contexts_), std::vector<std::deque<Step>>(n_arms)),
      estimates_(steps_.size() * size_t(n_arms)),
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

namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// A ratio estimate R = sum(x) / sum(y) over pairs (x_i, y_i), and its standard error
// sqrt(sum((x_i - C y_i)^2) / (n - 1) * n) / sum(y) around C (R unless `center` is given):
// infinity below two pairs.
struct Ratio {
  double value = -1.0, error = std::numeric_limits<double>::infinity();
  size_t n = 0;
};

Ratio ratio_of(const std::vector<std::pair<double, double>>& pairs, double center = -1.0) {
  Ratio r;
  r.n = pairs.size();
  double x = 0, y = 0;
  for (const auto& p : pairs) x += p.first, y += p.second;
  if (r.n == 0 || y <= 0) return r;
  r.value = x / y;
  if (r.n < 2) return r;
  double c = center >= 0 ? center : r.value, squares = 0;
  for (const auto& p : pairs) squares += (p.first - c * p.second) * (p.first - c * p.second);
  r.error = std::sqrt(squares / double(r.n - 1) * double(r.n)) / y;
  return r;
}

}  // namespace

std::vector<ArmSelector::Step> ArmSelector::without_slow(const std::deque<Step>& steps) {
  if (steps.empty()) return {};
  std::vector<double> v;
  v.reserve(steps.size());
  for (const Step& s : steps) v.push_back(s.seconds);
  double slow = 4.0 * median(std::move(v));
  std::vector<Step> out;
  for (const Step& s : steps)
    if (s.seconds <= slow) out.push_back(s);  // the median step itself always stays
  return out;
}

std::vector<ArmSelector::Step> ArmSelector::counted(int32_t cell, int32_t arm) const {
  const std::deque<Step>& steps = steps_[cell][arm];
  if (value_ == Value::kMedianRate) return {steps.begin(), steps.end()};
  return without_slow(steps);
}

double ArmSelector::measured_plain_seconds(int64_t batch) const {
  if (batch < 1 || size_t(batch) >= plain_.size()) return -1.0;
  double tokens = 0, seconds = 0;
  for (const Step& s : without_slow(plain_[size_t(batch)]))
    tokens += s.tokens, seconds += s.seconds;
  return tokens > 0 ? seconds / tokens * double(batch) : -1.0;
}

// P(b) from the plain step time T at b, else between the nearest measured batch sizes below
// (lo) and above (hi), else past the end from the two nearest on one side, kept within what a
// batch's cost can do: T grows with b, and no faster than b.
double ArmSelector::plain_seconds_per_token(int64_t batch_size) const {
  if (reference_ < 0 || plain_.empty() || batch_size < 1) return -1.0;
  size_t b = size_t(batch_size);
  if (plain_cost_.size() <= b) plain_cost_.resize(b + 1, 0.0);
  if (plain_cost_[b] != 0.0) return plain_cost_[b];
  double time = measured_plain_seconds(batch_size);
  if (time < 0) {
    // The two nearest measured batch sizes below (lo, lo2) and above (hi, hi2), with their T.
    int64_t lo = 0, lo2 = 0, hi = 0, hi2 = 0;
    double t_lo = 0, t_lo2 = 0, t_hi = 0, t_hi2 = 0;
    for (int64_t x = batch_size - 1; x >= 1 && !lo2; --x) {
      double t = measured_plain_seconds(x);
      if (t > 0) (lo ? lo2 : lo) = x, (lo2 ? t_lo2 : t_lo) = t;
    }
    for (int64_t x = batch_size + 1; x < int64_t(plain_.size()) && !hi2; ++x) {
      double t = measured_plain_seconds(x);
      if (t > 0) (hi ? hi2 : hi) = x, (hi2 ? t_hi2 : t_hi) = t;
    }
    double at = double(batch_size);
    if (lo && hi) {
      time = t_lo + (t_hi - t_lo) * (at - double(lo)) / double(hi - lo);
    } else if (hi) {  // below every measured batch size: T(hi) * b / hi <= T(b) <= T(hi)
      double low = t_hi * at / double(hi), high = t_hi;
      time = hi2 ? std::clamp(t_hi - (t_hi2 - t_hi) / double(hi2 - hi) * double(hi - batch_size),
                              low, high)
                 : (low + high) / 2;
    } else if (lo) {  // above every measured one: T(lo) <= T(b) <= T(lo) * b / lo
      double low = t_lo, high = t_lo * at / double(lo);
      time = lo2 ? std::clamp(t_lo + (t_lo - t_lo2) / double(lo - lo2) * double(batch_size - lo),
                              low, high)
                 : (low + high) / 2;
    } else {
      return -1.0;
    }
  }
  plain_cost_[b] = time / double(batch_size);
  return plain_cost_[b];
}

bool ArmSelector::needs_calibration(int64_t batch_size) const {
  if (reference_ < 0) return false;
  double reach = double(batch_size) / 4.0;
  int64_t from = std::max<int64_t>(1, int64_t(std::ceil(double(batch_size) - reach)));
  int64_t to = std::min<int64_t>(int64_t(plain_.size()) - 1, int64_t(double(batch_size) + reach));
  for (int64_t x = from; x <= to; ++x)
    if (plain_[size_t(x)].size() >= size_t(kCalibrationSteps)) return false;
  return true;
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
  e.value = a.value / c.value;
  e.error = e.value * std::sqrt(std::pow(a.error / a.value, 2) + std::pow(c.error / c.value, 2));
  if (!std::isfinite(e.error)) e.error = std::numeric_limits<double>::infinity();
  return e;
}

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
    return median(std::move(v));
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

bool ArmSelector::ruled_out(int32_t cell, int32_t arm) const {
  double upper = value(cell, arm) + kZ * standard_error(cell, arm);
  for (int32_t a = 0; a < n_arms_; ++a) {
    if (a == arm || value(cell, a) < 0) continue;
    if (value(cell, a) - kZ * standard_error(cell, a) > upper) return true;
  }
  return false;
}

int32_t ArmSelector::best(int32_t cell) const {
  if (reference_ >= 0) {
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
  if (arm == reference_) {
    if (plain_.size() <= size_t(step.batch)) plain_.resize(size_t(step.batch) + 1);
    std::deque<Step>& p = plain_[size_t(step.batch)];
    p.push_back(step);
    while (p.size() > kPlainWindow) p.pop_front();
    std::fill(plain_cost_.begin(), plain_cost_.end(), 0.0);
  }
}

}  // namespace tlt::rollout
