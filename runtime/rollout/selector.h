// Choosing a drafting strategy (an "arm") per batch: an epsilon-greedy bandit per batch-size
// bucket. The reward of a step is the tokens it emitted per second of wall time (accepted
// tokens x batch size / step time); an arm's value is the median of its last `window` rewards,
// which shrugs off the odd slow step. Each bucket tries every arm `min_samples` times before
// exploiting (one sample is too noisy: an arm's first step may carry one-off costs), then
// explores a uniformly random arm with probability epsilon.
//
// Optionally the statistics are kept per (bucket, context) cell, `contexts` of them per bucket:
// the engine passes whether most requests can copy their draft from their own context, where
// the arms' values differ from the rest of a response (a repeating stretch favours long drafts).
//
// Thread safety: none; one engine thread owns a selector.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace tlt::rollout {

class ArmSelector {
 public:
  // buckets: lower bounds of batch-size buckets, strictly increasing from 1 (api validates).
  ArmSelector(std::vector<int32_t> buckets, int32_t n_arms, double epsilon, int32_t window,
              uint64_t seed, int32_t min_samples = 3, int32_t contexts = 1);

  // The arm to use for a step over `batch_size` active requests in `context` [0, contexts).
  int32_t choose(int64_t batch_size, int32_t context = 0);
  // Records the reward of a step made with `arm` at `batch_size` in `context`.
  void report(int64_t batch_size, int32_t arm, double reward, int32_t context = 0);

  int32_t bucket_of(int64_t batch_size) const;
  // The statistics cell of a batch size and context: bucket * contexts + context.
  int32_t cell_of(int64_t batch_size, int32_t context = 0) const;
  // Median reward of `arm` in `cell`, or -1 when it has none yet.
  double value(int32_t cell, int32_t arm) const;
  // The arm with the highest value in `cell` (first arm with fewer than min_samples rewards if
  // any).
  int32_t best(int32_t cell) const;
  int32_t contexts() const { return contexts_; }
  int32_t n_arms() const { return n_arms_; }
  int64_t explorations() const { return explorations_; }

 private:
  const std::vector<int32_t> buckets_;
  const int32_t n_arms_;
  const double epsilon_;
  const size_t window_;
  const size_t min_samples_;
  const int32_t contexts_;
  std::mt19937_64 rng_;
  std::vector<std::vector<std::deque<double>>> rewards_;  // [cell][arm] -> recent rewards
  int64_t explorations_ = 0;
};

}  // namespace tlt::rollout
