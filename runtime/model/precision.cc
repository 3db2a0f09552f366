#include "runtime/model/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace tlt::model {

namespace {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
// LibTorch 2.4 took the device type as an argument and deprecated the per-device functions.
bool enabled_on(bool cuda) {
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
}
void enable_on(bool cuda, bool on) {
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, on);
}
at::ScalarType dtype_on(bool cuda) {
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
}
void set_dtype_on(bool cuda, at::ScalarType t) {
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, t);
}
#else
bool enabled_on(bool cuda) {
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void enable_on(bool cuda, bool on) {
  cuda ? at::autocast::set_enabled(on) : at::autocast::set_cpu_enabled(on);
}
at::ScalarType dtype_on(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_dtype_on(bool cuda, at::ScalarType t) {
  cuda ? at::autocast::set_autocast_gpu_dtype(t) : at::autocast::set_autocast_cpu_dtype(t);
}
#endif

}  // namespace

bool native_bfloat16(const torch::Device& device) {
  if (device.is_cuda()) return true;
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512bf16") != 0;
#else
  return false;
#endif
}

bool use_bfloat16(const std::string& dtype, bool real_model, const torch::Device& device) {
  if (dtype == "bfloat16") return true;
  if (dtype == "auto") return real_model && native_bfloat16(device);
  return false;
}

Bfloat16Autocast::Bfloat16Autocast(const torch::Device& device, bool enabled)
    : enabled_(enabled), cuda_(device.is_cuda()) {
  if (!enabled_) return;
  was_enabled_ = enabled_on(cuda_);
  was_dtype_ = dtype_on(cuda_);
  enable_on(cuda_, true);
  set_dtype_on(cuda_, at::kBFloat16);
  at::autocast::increment_nesting();
}

Bfloat16Autocast::~Bfloat16Autocast() {
  if (!enabled_) return;
  // The outermost guard drops the casts autocast cached for this region's weights.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  enable_on(cuda_, was_enabled_);
  set_dtype_on(cuda_, was_dtype_);
}

AutocastCacheScope::AutocastCacheScope(bool enabled) : enabled_(enabled) {
  if (enabled_) at::autocast::increment_nesting();
}

AutocastCacheScope::~AutocastCacheScope() {
  if (enabled_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

bool autocast_active(const torch::Device& device) {
  bool cuda = device.is_cuda();
  return enabled_on(cuda) && dtype_on(cuda) != at::kFloat;
}

}  // namespace tlt::model
