#include "runtime/model/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/model/transformer.h"

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
// property: bfloat16_decode_rows() probes the whole model.
Bfloat16Inference::Bfloat16Inference(bool enabled, int64_t min_rows)
    : enabled_(enabled), min_rows_(std::max<int64_t>(1, min_rows)) {
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

const torch::Tensor& Bfloat16Inference::copy_of(const torch::Tensor& w) {
  auto it = copies_.find(w.unsafeGetTensorImpl());
  if (it == copies_.end()) {
    torch::NoGradGuard no_grad;
    it = copies_.emplace(w.unsafeGetTensorImpl(), std::make_pair(w, w.to(torch::kBFloat16))).first;
  }
  return it->second.second;
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
    y = torch::nn::functional::linear(padded, w).narrow(0, 0, rows.size(0));
  } else {
    y = torch::nn::functional::linear(rows, w);
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(0);
  y = y.to(torch::kFloat32).view(shape);
  const torch::Tensor& bias = m.ptr()->bias;
  return bias.defined() ? y + bias : y;
}

namespace {

// Tokens of a probe: a fixed spread over the vocabulary (no RNG touched).
torch::Tensor probe_tokens(int64_t n, int64_t offset, int64_t vocab) {
  return (torch::arange(offset, offset + n, torch::kInt64) * 7919 % vocab).view({1, n});
}

// Logits (T, V) of `tokens` fed one at a time to a lone request after `prefix`.
torch::Tensor logits_one_at_a_time(Transformer& m, const torch::Tensor& prefix,
                                   const torch::Tensor& tokens, int64_t span) {
  auto cache = m->make_cache(1, span);
  cache->add_slot();
  int64_t p = prefix.size(1);
  torch::Device dev = m->lm_head->weight.device();
  m->forward(prefix.to(dev), sequential_positions(torch::zeros({1}, torch::kInt64), p).to(dev),
             cache.get());
  cache->commit_prefix(0, p);
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < tokens.size(1); ++i) {
    ForwardResult r = m->forward(tokens.narrow(1, i, 1).to(dev),
                                 torch::full({1, 1}, p + i, torch::kInt64).to(dev), cache.get());
    cache->commit_prefix(0, 1);
    rows.push_back(r.logits[0][0]);
  }
  return torch::stack(rows);
}

// kProbeSlots requests over one cache: slot 0 holds the probe's prefix, the others longer,
// unrelated contexts. Forwards after the prefill commit nothing, so they can be repeated.
constexpr int64_t kProbeSlots = 8;
std::unique_ptr<KVCache> probe_batch(Transformer& m, const torch::Tensor& prefix, int64_t span) {
  auto cache = m->make_cache(kProbeSlots, span);
  int64_t p = prefix.size(1), vocab = m->config().vocab;
  torch::Device dev = m->lm_head->weight.device();
  for (int64_t b = 0; b < kProbeSlots; ++b) {
    cache->add_slot();
    torch::Tensor context = b == 0 ? prefix : probe_tokens(p + 5 * b, 2 + b, vocab);
    int64_t n = context.size(1);
    cache->focus(b, 1);
    m->forward(context.to(dev), sequential_positions(torch::zeros({1}, torch::kInt64), n).to(dev),
               cache.get());
    cache->unfocus();
    cache->commit_prefix(b, n);
  }
  return cache;
}

// Logits (T, V) of slot 0's `tokens` (1, T) in one forward of the first `slots` requests of
// `cache` (probe_batch), each of the others with T tokens of its own: a verify forward of
// drafts at T > 1, a batched one-token step at T = 1.
torch::Tensor slot0_logits(Transformer& m, KVCache* cache, const torch::Tensor& tokens,
                           int64_t slots) {
  int64_t t = tokens.size(1), vocab = m->config().vocab;
  torch::Device dev = m->lm_head->weight.device();
  std::vector<int64_t> lengths;
  std::vector<torch::Tensor> toks;
  for (int64_t b = 0; b < slots; ++b) {
    lengths.push_back(cache->length(b));
    toks.push_back(b == 0 ? tokens : probe_tokens(t, 7 + b, vocab));
  }
  cache->focus(0, slots);
  torch::Tensor pos = sequential_positions(torch::tensor(lengths), t).to(dev);  // (slots, T)
  torch::Tensor logits = m->forward(torch::cat(toks).to(dev), pos, cache).logits[0];
  cache->unfocus();
  return logits;
}

// Whether decoding is row-invariant with products padded to `min_rows` (see
// bfloat16_decode_rows): a lone request's one-token steps against forwards of `slots` requests
// with `t` tokens each, whose products have slots x t rows: every count from 1 to 16 (one-token
// steps of 2 to 8 requests, verify forwards of one to seven) and 48.
bool rows_invariant_with(Transformer& m, int64_t min_rows, int64_t span) {
  Bfloat16Inference bfloat16(true, min_rows);
  int64_t vocab = m->config().vocab;
  torch::Tensor prefix = probe_tokens(41, 1, vocab), tokens = probe_tokens(16, 3, vocab);
  torch::Tensor lone = logits_one_at_a_time(m, prefix, tokens, span);  // (16, V)
  auto cache = probe_batch(m, prefix, span);
  static const std::pair<int64_t, int64_t> kShapes[] = {  // (slots, t)
      {6, 8}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}, {3, 3},
      {5, 2}, {1, 11}, {6, 2}, {1, 13}, {7, 2}, {5, 3}, {1, 16}};
  for (const auto& [slots, t] : kShapes) {
    torch::Tensor got = slot0_logits(m, cache.get(), tokens.narrow(1, 0, t), slots);  // (t, V)
    if (!torch::equal(lone.narrow(0, 0, t), got)) return false;
  }
  return true;
}

}  // namespace

int64_t bfloat16_decode_rows(Transformer& model) {
  static std::mutex mu;
  static std::map<std::string, int64_t> known;  // model shape -> padding (0: not invariant)
  const ModelConfig& c = model->config();
  std::string key = std::to_string(c.vocab) + "/" + std::to_string(c.dim) + "/" +
                    std::to_string(c.n_layers) + "/" + std::to_string(c.n_heads) + "/" +
                    std::to_string(c.n_kv_heads) + "/" + std::to_string(c.ffn) + "/" +
                    std::to_string(int(c.qkv_bias)) + "/" + model->lm_head->weight.device().str();
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  int64_t rows = 0;
  int64_t span = std::min<int64_t>(c.max_seq, 96);
  if (span >= 41 + 5 * (kProbeSlots - 1) + 16) {  // the longest probe context and its drafts
    torch::NoGradGuard no_grad;
    for (int64_t r : {int64_t(1), Bfloat16Inference::kTileRows}) {
      if (rows_invariant_with(model, r, span)) {
        rows = r;
        break;
      }
    }
  }
  known[key] = rows;
  return rows;
}

bool autocast_active(const torch::Device& device) {
  bool cuda = device.is_cuda();
  return enabled_on(cuda) && dtype_on(cuda) != at::kFloat;
}

}  // namespace tlt::model
