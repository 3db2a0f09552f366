#include "runtime/rollout/selector.h"

#include <algorithm>

namespace tlt::rollout {

ArmSelector::ArmSelector(std::vector<int32_t> buckets, int32_t n_arms, double epsilon,
                         int32_t window, uint64_t seed, int32_t min_samples, int32_t contexts)
    : buckets_(std::move(buckets)),
      n_arms_(n_arms),
      epsilon_(epsilon),
      window_(static_cast<size_t>(window)),
      min_samples_(static_cast<size_t>(std::max(1, std::min(min_samples, window)))),
      contexts_(std::max(1, contexts)),
      rng_(seed),
      rewards_(buckets_.size() * size_t(contexts_), std::vector<std::deque<double>>(n_arms)) {}

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

double ArmSelector::value(int32_t cell, int32_t arm) const {
  const std::deque<double>& r = rewards_[cell][arm];
  if (r.empty()) return -1.0;
  std::vector<double> v(r.begin(), r.end());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

int32_t ArmSelector::best(int32_t cell) const {
  int32_t best = 0;
  double best_value = -2.0;
  for (int32_t a = 0; a < n_arms_; ++a) {
    if (rewards_[cell][a].size() < min_samples_) return a;  // not explored enough yet
    double v = value(cell, a);
    if (v > best_value) best_value = v, best = a;
  }
  return best;
}

int32_t ArmSelector::choose(int64_t batch_size, int32_t context) {
  int32_t cell = cell_of(batch_size, context);
  if (n_arms_ > 1 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < epsilon_) {
    ++explorations_;
    return std::uniform_int_distribution<int32_t>(0, n_arms_ - 1)(rng_);
  }
  return best(cell);
}

void ArmSelector::report(int64_t batch_size, int32_t arm, double reward, int32_t context) {
  std::deque<double>& r = rewards_[cell_of(batch_size, context)][arm];
  r.push_back(reward);
  while (r.size() > window_) r.pop_front();
}

}  // namespace tlt::rollout
