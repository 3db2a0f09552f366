// Mixed precision for training: float32 weights, gradients and optimizer state, matrix
// products in bfloat16 (LibTorch autocast). On a CPU with AMX, SmolLM2-135M's policy-update
// forward and backward over 1024 tokens ran 2.5x faster this way (README, "Mixed precision").
// Decoding stays in float32: bfloat16 rounding would turn the last-bit differences between a
// many-token verify forward and one-token steps into different tokens.
//
// Thread safety: autocast state is per thread; a guard affects the thread that made it.
#pragma once

#include <string>

#include <torch/torch.h>

namespace tlt::model {

// Whether `device` multiplies bfloat16 matrices in hardware: any CUDA device (taken to be Ampere
// or newer; older GPUs emulate bfloat16, and spec.model.dtype: float32 is the way out), or a CPU
// with AVX512-BF16 (every CPU with AMX has it). Elsewhere bfloat16 products are emulated, slower
// than float32.
bool native_bfloat16(const torch::Device& device);

// spec.model.dtype resolved for a model on `device`: "float32" or "bfloat16" as given; "auto"
// is bfloat16 for a real model (`real_model`: spec.model.path) on native_bfloat16 hardware,
// float32 otherwise (a preset's runs and tests keep their float32 results).
bool use_bfloat16(const std::string& dtype, bool real_model, const torch::Device& device);

// While alive (and `enabled`), matrix products on `device`'s type in this thread run in
// bfloat16; elementwise ops, reductions and the weights keep their dtypes. Restores the
// previous state when destroyed. Run backward() after the guard is gone: autograd already
// replays each product in the dtype its forward used.
class Bfloat16Autocast {
 public:
  Bfloat16Autocast(const torch::Device& device, bool enabled);
  ~Bfloat16Autocast();
  Bfloat16Autocast(const Bfloat16Autocast&) = delete;
  Bfloat16Autocast& operator=(const Bfloat16Autocast&) = delete;

 private:
  bool enabled_ = false;
  bool cuda_ = false;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

// While alive (and `enabled`), autocast's bfloat16 casts of weights made in the Bfloat16Autocast
// regions it spans stay cached from one region to the next (one cast per weight instead of one
// per forward, e.g. across a minibatch's micro-batches); dropped when it is destroyed. The weights
// must not change while it lives (an optimizer step ends it).
class AutocastCacheScope {
 public:
  explicit AutocastCacheScope(bool enabled);
  ~AutocastCacheScope();
  AutocastCacheScope(const AutocastCacheScope&) = delete;
  AutocastCacheScope& operator=(const AutocastCacheScope&) = delete;

 private:
  bool enabled_;
};

// Whether a Bfloat16Autocast (or any autocast to a reduced dtype) is active in this thread for
// `device`: custom autograd functions ask so that their products follow it.
bool autocast_active(const torch::Device& device);

}  // namespace tlt::model
