#include "runtime/model/decode_attention.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

// This file is compiled with -ffp-contract=off (runtime/CMakeLists.txt): every sum and product
// below is the one the source spells, so a loop's vectorised body and its scalar remainder give
// the same bits, and so does every clone of attend_rows.

namespace tlt::model {
namespace {

constexpr int kLanes = 16;

// acc[0] + ... + acc[kLanes - 1], always as the same tree.
inline float lane_sum(float* acc) {
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

// sum_i a[i] * b[i], element i into lane i % kLanes.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l] * b[i + l];
  return lane_sum(acc);
}

// sum_i a[i], element i into lane i % kLanes.
inline float sum(const float* a, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l];
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l];
  return lane_sum(acc);
}

// e^x for x <= 0 (a softmax's shifted scores), within 2 ulp; 0 below -87. x = n ln2 + r with
// |r| <= ln2 / 2, e^r by its degree-6 Taylor-like polynomial, 2^n from the exponent bits. Plain
// float operations only, so vector and scalar code agree.
inline float exp_nonpositive(float x) {
  float y = x < -87.0f ? -87.0f : x;
  float n = float(int32_t(y * 1.44269504f - 0.5f));  // round(y / ln2), y <= 0
  float r = (y - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return x < -87.0f ? 0.0f : p * two_n;
}

struct Problem {
  const float *q, *k, *v, *mask;
  float* out;
  int64_t h, t, s, d, group;  // query heads, rows per head, keys, head dim, H / Hkv
  int64_t q0, q1, q2;         // q strides (b, h, t)
  int64_t k0, k1, k2;         // k strides (b, kv head, s)
  int64_t v0, v1, v2;         // v strides
  int64_t m0, m3, m4;         // mask strides (b, t, s)
  float scale;
};

}  // namespace

// Rows [begin, end) of the flattened (B, H, T) queries. Cloned per instruction set; every clone
// computes the same bits (see the top of the file).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void attend_rows(const Problem& p, int64_t begin, int64_t end) {
  std::vector<float> scores(size_t(p.s)), acc(size_t(p.d));
  std::vector<int64_t> keys(size_t(p.s));
  for (int64_t row = begin; row < end; ++row) {
    int64_t b = row / (p.h * p.t), h = (row / p.t) % p.h, t = row % p.t, kv = h / p.group;
    const float* q = p.q + b * p.q0 + h * p.q1 + t * p.q2;
    const float* k = p.k + b * p.k0 + kv * p.k1;
    const float* v = p.v + b * p.v0 + kv * p.v1;
    const float* m = p.mask + b * p.m0 + t * p.m3;
    // The visible keys in cache order, their scores and the largest.
    int64_t n = 0;
    float top = -3.0e38f;
    for (int64_t j = 0; j < p.s; ++j) {
      if (m[j * p.m4] != 0.0f) continue;
      float score = dot(q, k + j * p.k2, p.d) * p.scale;
      scores[size_t(n)] = score;
      keys[size_t(n++)] = j;
      top = score > top ? score : top;
    }
    float* o = p.out + row * p.d;
    if (n == 0) {
      std::memset(o, 0, size_t(p.d) * sizeof(float));
      continue;
    }
    for (int64_t i = 0; i < n; ++i) scores[size_t(i)] = exp_nonpositive(scores[size_t(i)] - top);
    float total = sum(scores.data(), n);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const float w = scores[size_t(i)];
      const float* vr = v + keys[size_t(i)] * p.v2;
      for (int64_t c = 0; c < p.d; ++c) acc[size_t(c)] += w * vr[c];
    }
    for (int64_t c = 0; c < p.d; ++c) o[c] = acc[size_t(c)] / total;
  }
}

namespace {
std::atomic<bool> row_invariant_on{true};
}  // namespace

void enable_row_invariant_attention(bool on) {
  row_invariant_on = on;
}

bool row_invariant_attention_applies(const torch::Tensor& q, const torch::Tensor& k) {
  return row_invariant_on && q.device().is_cpu() && q.scalar_type() == torch::kFloat32 &&
         k.scalar_type() == torch::kFloat32 &&
         !(torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad()));
}

torch::Tensor row_invariant_attention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& mask,
                                      double scale) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && mask.dim() == 5,
              "row_invariant_attention: q, k, v (B, H, T, D) and mask (B, 1, 1, T, S) expected");
  TORCH_CHECK(
      q.device().is_cpu() && k.device().is_cpu() && v.device().is_cpu() && mask.device().is_cpu(),
      "row_invariant_attention: CPU tensors only");
  TORCH_CHECK(q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32 &&
                  v.scalar_type() == torch::kFloat32 && mask.scalar_type() == torch::kFloat32,
              "row_invariant_attention: float32 tensors only");
  int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  int64_t hkv = k.size(1), s = k.size(2);
  TORCH_CHECK(k.size(0) == b && v.size(0) == b && v.size(1) == hkv && v.size(2) == s &&
                  k.size(3) == d && v.size(3) == d && hkv > 0 && h % hkv == 0,
              "row_invariant_attention: k and v must be (B, Hkv, S, D) with H a multiple of Hkv");
  TORCH_CHECK(mask.size(0) == b && mask.size(3) == t && mask.size(4) == s,
              "row_invariant_attention: mask must be (B, 1, 1, T, S)");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1,
              "row_invariant_attention: the head dimension must be contiguous");
  torch::Tensor out = torch::empty({b, h, t, d}, q.options());  // (B, H, T, D)
  Problem p{q.data_ptr<float>(),
            k.data_ptr<float>(),
            v.data_ptr<float>(),
            mask.data_ptr<float>(),
            out.data_ptr<float>(),
            h,
            t,
            s,
            d,
            h / hkv,
            q.stride(0),
            q.stride(1),
            q.stride(2),
            k.stride(0),
            k.stride(1),
            k.stride(2),
            v.stride(0),
            v.stride(1),
            v.stride(2),
            mask.stride(0),
            mask.stride(3),
            mask.stride(4),
            float(scale)};
  at::parallel_for(0, b * h * t, 1,
                   [&](int64_t begin, int64_t end) { attend_rows(p, begin, end); });
  return out;
}

}  // namespace tlt::model
