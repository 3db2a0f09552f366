// Mixed precision for training: float32 weights, gradients and optimizer state, matrix
// products in bfloat16 (LibTorch autocast), which CPUs with AMX and GPUs multiply several times
// faster than float32 (docs/benchmarks.md has the measured policy-update speed-up).
// Decoding (Bfloat16Inference) multiplies by bfloat16 copies of the weights and keeps
// activations, the cache and the logits in float32; it is lossless only where the forward is
// row-invariant (on the CPU by runtime/model/decode_attention.h; on any device as probed by
// runtime/model/bfloat16_probe.h): bfloat16 rounding would otherwise turn the last-bit
// differences between a many-token verify forward and one-token steps into different tokens.
//
// Thread safety: autocast state is per thread; a guard affects the thread that made it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

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

// Bfloat16 copies of a module's linear weights that keep their storage from one use to the next
// (CUDA graphs captured over them read them in place). refresh() makes the missing copies and
// rewrites the others from the float32 weights in place, so a copy follows its weight after an
// in-place update (a checkpoint loaded, weights synced). Ownership: holds the weights and their
// copies. Not copyable; one thread.
class Bfloat16Weights {
 public:
  Bfloat16Weights() = default;
  Bfloat16Weights(const Bfloat16Weights&) = delete;
  Bfloat16Weights& operator=(const Bfloat16Weights&) = delete;
  // Every torch::nn::Linear weight of `module` (its submodules included) gets its current
  // values in its copy.
  void refresh(torch::nn::Module& module);
  // w's copy, or nullptr when refresh() made none for it.
  const torch::Tensor* find(const torch::Tensor& w) const;
  size_t size() const { return copies_.size(); }

 private:
  // weight's TensorImpl -> (the weight, kept alive so the key stays its own; its bfloat16 copy)
  std::unordered_map<const void*, std::pair<torch::Tensor, torch::Tensor>> copies_;
};

// While alive (and `enabled`), this thread's linear layers in forwards without autograd
// (model::linear below) multiply float32 inputs by bfloat16 copies of their weights, made the
// first time each weight is used in the scope and kept until it ends (or taken from `persistent`,
// borrowed, where it holds one), and return float32. The weights must not change while it lives
// (a rollout engine holds one per generate call). Scopes nest; the innermost one serves.
// Lossless only where the forward is row-invariant: the engine decodes under it after
// bfloat16_decode_rows() (runtime/model/bfloat16_probe.h) found the verify forwards and batched
// steps agree bit for bit with one-token steps on the model's device. Not copyable; one thread.
// `min_rows`: products of fewer rows are padded to that many (what bfloat16_decode_rows() found
// row-invariant; 1 = no padding).
class Bfloat16Inference {
 public:
  // The padding that made every shape tried here row-invariant: one AMX tile's rows.
  static constexpr int64_t kTileRows = 16;
  explicit Bfloat16Inference(bool enabled, int64_t min_rows = kTileRows,
                             const Bfloat16Weights* persistent = nullptr);
  ~Bfloat16Inference();
  Bfloat16Inference(const Bfloat16Inference&) = delete;
  Bfloat16Inference& operator=(const Bfloat16Inference&) = delete;

  // The innermost enabled scope of this thread, or nullptr.
  static Bfloat16Inference* active();
  // w's bfloat16 copy (made on first use).
  const torch::Tensor& copy_of(const torch::Tensor& w);
  int64_t min_rows() const { return min_rows_; }

 private:
  bool enabled_;
  int64_t min_rows_;
  const Bfloat16Weights* persistent_ = nullptr;
  Bfloat16Inference* outer_ = nullptr;
  // weight's TensorImpl -> (the weight, kept alive so the key stays its own; its bfloat16 copy)
  std::unordered_map<const void*, std::pair<torch::Tensor, torch::Tensor>> copies_;
};

// While alive, this thread has no active Bfloat16Inference (products in float32 again); the
// scope it hid serves again when it is destroyed. For a module that should not follow the
// scope (the rollout engine's drafter).
class Float32Products {
 public:
  Float32Products();
  ~Float32Products();
  Float32Products(const Float32Products&) = delete;
  Float32Products& operator=(const Float32Products&) = delete;

 private:
  Bfloat16Inference* hidden_;
};

// m(x) for x (..., in): through the active Bfloat16Inference's copy of m's weight when there is
// one, autograd is off and x is float32 (the bias, if any, is added in float32); else m(x).
torch::Tensor linear(const torch::nn::Linear& m, const torch::Tensor& x);

// Test hook: while on, linear()'s bfloat16 products of fewer than Bfloat16Inference::kTileRows
// rows (after padding) sum in another order, bits that differ from the same rows in a larger
// product, as the small-block kernels of some CPUs do: unpadded decoding is then not
// row-invariant, which the probe (runtime/model/bfloat16_probe.h) and the greedy checks must
// catch. Starts as TLT_TEST_BF16_ROW_DEPENDENT=1 in the environment says (read at the first
// product or call); this switches it for the whole process (thread-safe). For tests only.
void set_row_dependent_bfloat16_products(bool on);

}  // namespace tlt::model
