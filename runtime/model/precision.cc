#include "runtime/model/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

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

namespace {
thread_local Bfloat16Inference* innermost = nullptr;
}  // namespace

// kTileRows: on SmolLM2 a 16-row product costs 1.07x a one-row product. With LibTorch 1.13's
// oneDNN, rows of 1- to 4-row products came out different from the same rows in larger products
// for some shapes (one row for N = 192, K = 576 in isolation; two rows for N <= 128), while 16 and
// more rows agreed for every shape of 16 or more output columns tried. Neither is a documented
// property: bfloat16_decode_rows() (runtime/model/bfloat16_probe.h) probes the whole model.
Bfloat16Inference::Bfloat16Inference(bool enabled, int64_t min_rows,
                                     const Bfloat16Weights* persistent)
    : enabled_(enabled), min_rows_(std::max<int64_t>(1, min_rows)), persistent_(persistent) {
  if (!enabled_) return;
  outer_ = innermost;
  innermost = this;
}

Bfloat16Inference::~Bfloat16Inference() {
  if (enabled_) innermost = outer_;
}

Bfloat16Inference* Bfloat16Inference::active() {
  return innermost;
}

Float32Products::Float32Products() : hidden_(innermost) {
  innermost = nullptr;
}

Float32Products::~Float32Products() {
  innermost = hidden_;
}

void Bfloat16Weights::refresh(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (const std::shared_ptr<torch::nn::Module>& m : module.modules(/*include_self=*/true)) {
    auto* linear = dynamic_cast<torch::nn::LinearImpl*>(m.get());
    if (linear == nullptr) continue;
    const torch::Tensor& w = linear->weight;  // (out, in)
    auto it = copies_.find(w.unsafeGetTensorImpl());
    if (it == copies_.end()) {
      copies_.emplace(w.unsafeGetTensorImpl(), std::make_pair(w, w.to(torch::kBFloat16)));
    } else {
      it->second.second.copy_(w);
    }
  }
}

const torch::Tensor* Bfloat16Weights::find(const torch::Tensor& w) const {
  auto it = copies_.find(w.unsafeGetTensorImpl());
  return it == copies_.end() ? nullptr : &it->second.second;
}

const torch::Tensor& Bfloat16Inference::copy_of(const torch::Tensor& w) {
  if (persistent_ != nullptr) {
    if (const torch::Tensor* c = persistent_->find(w)) return *c;
  }
  auto it = copies_.find(w.unsafeGetTensorImpl());
  if (it == copies_.end()) {
    torch::NoGradGuard no_grad;
    it = copies_.emplace(w.unsafeGetTensorImpl(), std::make_pair(w, w.to(torch::kBFloat16))).first;
  }
  return it->second.second;
}

namespace {

// The test hook's state: TLT_TEST_BF16_ROW_DEPENDENT=1 at the first product, or what
// set_row_dependent_bfloat16_products() set since.
std::atomic<int>& row_dependent_state() {
  static std::atomic<int> on{[] {
    const char* v = std::getenv("TLT_TEST_BF16_ROW_DEPENDENT");
    return v != nullptr && std::string(v) == "1" ? 1 : 0;
  }()};
  return on;
}

bool row_dependent_products() {
  return row_dependent_state().load(std::memory_order_relaxed) != 0;
}

// rows (M, K) x w (N, K)^T in bfloat16: (M, N). Under TLT_TEST_BF16_ROW_DEPENDENT, products of
// fewer than kTileRows rows sum K in blocks of kHookBlock and add the blocks' sums in bfloat16, as
// a small-block kernel that accumulates across blocks in bfloat16 would: another summation order
// and precision than the same rows in a larger product.
constexpr int64_t kHookBlock = 64;
torch::Tensor bfloat16_product(const torch::Tensor& rows, const torch::Tensor& w) {
  int64_t k = rows.size(1);
  if (!row_dependent_products() || rows.size(0) >= Bfloat16Inference::kTileRows) {
    return torch::nn::functional::linear(rows, w);
  }
  int64_t n = std::min(kHookBlock, k);
  torch::Tensor y = torch::nn::functional::linear(rows.narrow(1, 0, n), w.narrow(1, 0, n));
  for (int64_t k0 = n; k0 < k; k0 += kHookBlock) {
    n = std::min(kHookBlock, k - k0);
    y = y + torch::nn::functional::linear(rows.narrow(1, k0, n), w.narrow(1, k0, n));  // (M, N)
  }
  return y;
}

}  // namespace

void set_row_dependent_bfloat16_products(bool on) {
  row_dependent_state().store(on ? 1 : 0, std::memory_order_relaxed);
}

torch::Tensor linear(const torch::nn::Linear& m, const torch::Tensor& x) {
  Bfloat16Inference* scope = Bfloat16Inference::active();
  if (scope == nullptr || torch::GradMode::is_enabled() || x.scalar_type() != torch::kFloat32) {
    return m.ptr()->forward(x);
  }
  const torch::Tensor& w = scope->copy_of(m.ptr()->weight);               // (out, in)
  torch::Tensor rows = x.reshape({-1, x.size(-1)}).to(torch::kBFloat16);  // (M, in)
  torch::Tensor y;
  int64_t min_rows = scope->min_rows();
  if (rows.size(0) < min_rows) {
    // Fewer rows take other paths through the library (a matrix-vector product, small-block
    // kernels) that sum in another order; padded, they get the bits a block of rows gets.
    torch::Tensor padded = torch::zeros({min_rows, rows.size(1)}, rows.options());
    padded.narrow(0, 0, rows.size(0)).copy_(rows);
    y = bfloat16_product(padded, w).narrow(0, 0, rows.size(0));
  } else {
    y = bfloat16_product(rows, w);
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(0);
  y = y.to(torch::kFloat32).view(shape);
  const torch::Tensor& bias = m.ptr()->bias;
  return bias.defined() ? y + bias : y;
}

bool autocast_active(const torch::Device& device) {
  bool cuda = device.is_cuda();
  return enabled_on(cuda) && dtype_on(cuda) != at::kFloat;
}

}  // namespace tlt::model
