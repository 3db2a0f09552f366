#include "runtime/model/decode_attention.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

// This file is compiled with -ffp-contract=off (runtime/CMakeLists.txt): every sum and product
// below is the one the source spells, so a loop's vectorised body and its scalar remainder give
// the same bits, and so does every clone of attend_pairs.

namespace tlt::model {
namespace {

// Floats in a V16 (below): the keys of a tile, the lanes of every sum.
constexpr int64_t kLanes = 16;

// acc[0] + ... + acc[kLanes - 1], always as the same tree.
inline float lane_sum(float* acc) {
  for (int64_t w = kLanes / 2; w >= 1; w /= 2)
    for (int64_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

// 16 floats as one value (GCC's vector extension): element-wise float arithmetic, lowered to
// whatever vector width the clone has, so every clone gives the same bits. (It never crosses a
// call boundary outside this file, so GCC's note about its calling convention does not apply.)
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float V16 __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t V16i __attribute__((vector_size(kLanes * sizeof(int32_t))));
inline V16 load(const float* x) {
  V16 y;
  std::memcpy(&y, x, sizeof y);
  return y;
}
inline void store(float* x, const V16& y) {
  std::memcpy(x, &y, sizeof y);
}
// Float to int32 by truncation and back, for a float or element-wise for a V16.
template <typename To, typename From>
inline To convert(From x) {
  if constexpr (std::is_same_v<To, int32_t> || std::is_same_v<To, float>) {
    return To(x);
  } else {
    return __builtin_convertvector(x, To);
  }
}

// e^x for x <= 0 (a softmax's shifted scores), within 2 ulp; 0 below -87. x = n ln2 + r with
// |r| <= ln2 / 2, e^r by its degree-6 Taylor-like polynomial, 2^n from the exponent bits. For a
// float or element-wise for a V16: the same float operations either way, so both agree.
template <typename F, typename I>
inline F exp_nonpositive(F x) {
  F y = x < -87.0f ? F{} - 87.0f : x;
  I i = convert<I>(y * 1.44269504f - 0.5f);  // round(y / ln2) as an integer, y <= 0
  F n = convert<F>(i);
  F r = (y - n * 0.693359375f) - n * -2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  I bits = (i + 127) << 23;
  F two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return x < -87.0f ? F{} : p * two_n;
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

// Keys are scored kLanes at a time from a transposed tile, one key per lane. A key's score is
// sum_d q[d] * k[d] added in the order d = 0, 1, ..., D - 1 whatever lane it lands in, so it is a
// function of q and that key alone.
// Query rows scored together against one tile (their sums interleave; each keeps its own order).
constexpr int64_t kRowsAtOnce = 4;

// scores[r][j] = (q_r . k_j) * scale for the n rows `q[r]` (r < kRowsAtOnce) and the kLanes keys
// of `tile` (D, kLanes).
inline void score_block(const float* const* q, int64_t n, const float* tile, int64_t d, float scale,
                        float (*scores)[kLanes]) {
  V16 acc[kRowsAtOnce] = {};
  for (int64_t c = 0; c < d; ++c) {
    const V16 kc = load(tile + c * kLanes);
    for (int64_t r = 0; r < kRowsAtOnce; ++r) acc[r] = acc[r] + (r < n ? q[r][c] : 0.0f) * kc;
  }
  for (int64_t r = 0; r < n; ++r) store(scores[r], acc[r] * scale);
}

// One row's output from its raw scores (S,) over all keys: softmax over the keys its mask row
// shows, in cache order, then the weighted sum of their values.
inline void finish_row(const Problem& p, const float* raw, const float* m, const float* v,
                       int64_t* keys, float* w, float* o) {
  // The visible keys in cache order, their scores (compacted into w) and the largest.
  int64_t n = 0;
  float top = -3.0e38f;
  for (int64_t j = 0; j < p.s; ++j) {
    if (m[j * p.m4] != 0.0f) continue;
    float score = raw[j];
    w[n] = score;
    keys[n++] = j;
    top = score > top ? score : top;
  }
  if (n == 0) {
    std::memset(o, 0, size_t(p.d) * sizeof(float));
    return;
  }
  // Weights e^(score - top), 16 at a time; the padding up to a multiple of 16 gets e^-3e38 = 0,
  // which adds nothing to the total: element i goes to lane i % 16, the lanes then add as one
  // fixed tree.
  int64_t padded = (n + kLanes - 1) / kLanes * kLanes;
  for (int64_t i = n; i < padded; ++i) w[i] = -3.0e38f;
  V16 lanes = {};
  for (int64_t i = 0; i < padded; i += kLanes) {
    V16 e = exp_nonpositive<V16, V16i>(load(w + i) - top);
    store(w + i, e);
    lanes = lanes + e;
  }
  float acc[kLanes];
  store(acc, lanes);
  const float total = lane_sum(acc);
  // Each output element sums w_i * v_i over the visible keys i in order: 16 elements to a
  // vector, four vectors at a time in registers, the last few elements one by one.
  int64_t c0 = 0;
  for (; c0 + 4 * kLanes <= p.d; c0 += 4 * kLanes) {
    V16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (int64_t i = 0; i < n; ++i) {
      const float wi = w[i];
      const float* vr = v + keys[i] * p.v2 + c0;
      a0 = a0 + wi * load(vr), a1 = a1 + wi * load(vr + kLanes);
      a2 = a2 + wi * load(vr + 2 * kLanes), a3 = a3 + wi * load(vr + 3 * kLanes);
    }
    store(o + c0, a0 / total), store(o + c0 + kLanes, a1 / total);
    store(o + c0 + 2 * kLanes, a2 / total), store(o + c0 + 3 * kLanes, a3 / total);
  }
  for (; c0 + kLanes <= p.d; c0 += kLanes) {
    V16 a0 = {};
    for (int64_t i = 0; i < n; ++i) a0 = a0 + w[i] * load(v + keys[i] * p.v2 + c0);
    store(o + c0, a0 / total);
  }
  for (; c0 < p.d; ++c0) {
    float a = 0.0f;
    for (int64_t i = 0; i < n; ++i) a = a + w[i] * v[keys[i] * p.v2 + c0];
    o[c0] = a / total;
  }
}

}  // namespace

// The rows of (batch, K/V head) pairs [begin, end): the group's query heads times T rows each.
// Cloned per instruction set; every clone computes the same bits (see the top of the file).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void attend_pairs(const Problem& p, int64_t begin, int64_t end) {
  const int64_t rows = p.group * p.t, blocks = (p.s + kLanes - 1) / kLanes;
  std::vector<float> raw(size_t(rows * p.s)), tile(size_t(p.d * kLanes));
  std::vector<int64_t> keys(size_t(p.s));
  std::vector<float> weights(size_t((p.s + kLanes - 1) / kLanes * kLanes));
  std::vector<const float*> q(static_cast<size_t>(rows));
  for (int64_t pair = begin; pair < end; ++pair) {
    int64_t b = pair / (p.h / p.group), kv = pair % (p.h / p.group);
    const float* k = p.k + b * p.k0 + kv * p.k1;
    const float* v = p.v + b * p.v0 + kv * p.v1;
    for (int64_t r = 0; r < rows; ++r)  // row r: head kv * group + r / T, position r % T
      q[size_t(r)] = p.q + b * p.q0 + (kv * p.group + r / p.t) * p.q1 + (r % p.t) * p.q2;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      int64_t j0 = blk * kLanes, width = std::min(kLanes, p.s - j0);
      if (width < kLanes) std::fill(tile.begin(), tile.end(), 0.0f);
      for (int64_t c = 0; c < p.d; ++c)
        for (int64_t l = 0; l < width; ++l) tile[size_t(c * kLanes + l)] = k[(j0 + l) * p.k2 + c];
      for (int64_t r = 0; r < rows; r += kRowsAtOnce) {
        int64_t n = std::min(kRowsAtOnce, rows - r);
        float scores[kRowsAtOnce][kLanes];
        score_block(q.data() + r, n, tile.data(), p.d, p.scale, scores);
        for (int64_t i = 0; i < n; ++i)
          std::memcpy(raw.data() + (r + i) * p.s + j0, scores[i], size_t(width) * sizeof(float));
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      int64_t h = kv * p.group + r / p.t, t = r % p.t;
      finish_row(p, raw.data() + r * p.s, p.mask + b * p.m0 + t * p.m3, v, keys.data(),
                 weights.data(), p.out + ((b * p.h + h) * p.t + t) * p.d);
    }
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
  at::parallel_for(0, b * hkv, 1, [&](int64_t begin, int64_t end) { attend_pairs(p, begin, end); });
  return out;
}

}  // namespace tlt::model
