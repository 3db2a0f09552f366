// Small tensor helpers shared by the rollout engine and its draft sources. Internal to
// runtime/rollout; header-only.
//
// Shapes: B batch, T tokens, V vocabulary.
// Thread safety: pure functions.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/rollout/sampling.h"

namespace tlt::rollout {

// Logits (B, T, V) or (B, V) of any dtype/device as one contiguous CPU float64 tensor.
inline torch::Tensor host_logits(const torch::Tensor& logits) {
  return logits.to(torch::kCPU, torch::kFloat32).contiguous();
}

// log(p), and -infinity for p = 0 (a floor on log-probabilities that lets everything through).
inline double log_or_minus_infinity(double p) {
  return p > 0.0 ? std::log(p) : -std::numeric_limits<double>::infinity();
}

// The softmax probability of the largest of V logits.
inline double top_probability(const float* row, int64_t v) {
  double m = row[argmax(row, v)], z = 0.0;
  for (int64_t j = 0; j < v; ++j) z += std::exp(double(row[j]) - m);
  return 1.0 / z;
}

// A 1-D int64 tensor of `v` on `device`.
inline torch::Tensor long_tensor(const std::vector<int64_t>& v, torch::Device device) {
  return torch::tensor(v, torch::kInt64).to(device);
}

}  // namespace tlt::rollout
