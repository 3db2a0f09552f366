#include "runtime/model/gguf_quant.h"

#include <cstring>

namespace tlt::model {
namespace {

constexpr int64_t kQK = 32;    // values per block of the 32-value formats
constexpr int64_t kQKK = 256;  // values per super-block of the K formats

struct Entry {
  GgmlType type;
  GgmlTypeInfo info;
};

constexpr Entry kTypes[] = {
    {GgmlType::kF32, {"F32", 1, 4}},
    {GgmlType::kF16, {"F16", 1, 2}},
    {GgmlType::kBF16, {"BF16", 1, 2}},
    {GgmlType::kQ8_0, {"Q8_0", kQK, 2 + kQK}},
    {GgmlType::kQ4_0, {"Q4_0", kQK, 2 + kQK / 2}},
    {GgmlType::kQ4_1, {"Q4_1", kQK, 4 + kQK / 2}},
    {GgmlType::kQ5_0, {"Q5_0", kQK, 2 + 4 + kQK / 2}},
    {GgmlType::kQ5_1, {"Q5_1", kQK, 4 + 4 + kQK / 2}},
    {GgmlType::kQ4_K, {"Q4_K", kQKK, 4 + 12 + kQKK / 2}},
    {GgmlType::kQ5_K, {"Q5_K", kQKK, 4 + 12 + kQKK / 8 + kQKK / 2}},
    {GgmlType::kQ6_K, {"Q6_K", kQKK, kQKK / 2 + kQKK / 4 + kQKK / 16 + 2}},
};

uint16_t load_u16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}
float load_half(const uint8_t* p) {
  return half_to_float(load_u16(p));
}

// Q8_0: d, q[32].
void block_q8_0(const uint8_t* b, float* y) {
  float d = load_half(b);
  const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < kQK; ++j) y[j] = d * float(q[j]);
}

// Q4_0 / Q4_1: low nibbles are values 0..15, high nibbles 16..31.
void block_q4(const uint8_t* b, float* y, bool with_min) {
  float d = load_half(b), m = with_min ? load_half(b + 2) : 0.0f;
  const uint8_t* qs = b + (with_min ? 4 : 2);
  float offset = with_min ? 0.0f : -8.0f;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * (float(qs[j] & 0x0F) + offset) + m;
    y[j + kQK / 2] = d * (float(qs[j] >> 4) + offset) + m;
  }
}

// Q5_0 / Q5_1: as Q4, plus a 32-bit word whose bit j is value j's fifth bit.
void block_q5(const uint8_t* b, float* y, bool with_min) {
  float d = load_half(b), m = with_min ? load_half(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh = 0;
  std::memcpy(&qh, p, 4);  // little-endian hosts only (x86-64, aarch64)
  const uint8_t* qs = p + 4;
  float offset = with_min ? 0.0f : -16.0f;
  for (int j = 0; j < kQK / 2; ++j) {
    int lo = (qs[j] & 0x0F) | int(((qh >> j) & 1u) << 4);
    int hi = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * (float(lo) + offset) + m;
    y[j + kQK / 2] = d * (float(hi) + offset) + m;
  }
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block: sub-blocks 0..3
// keep theirs in the low 6 bits of bytes j and j + 4; 4..7 in the nibbles of byte j + 4 plus the
// top 2 bits of bytes j - 4 and j.
void scale_min_k4(int j, const uint8_t* s, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K and Q5_K: 4 chunks of 64 values; in each, 32 bytes of qs give the low nibbles to the first
// 32 values and the high nibbles to the next 32. For Q5_K, bit 2c (2c + 1) of qh[l] is the fifth
// bit of value l of chunk c's first (second) half.
void block_k45(const uint8_t* b, float* y, bool five_bits) {
  float d = load_half(b), dmin = load_half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 16 + (five_bits ? kQKK / 8 : 0);
  for (int c = 0; c < 4; ++c) {
    int sc1, m1, sc2, m2;
    scale_min_k4(2 * c, scales, &sc1, &m1);
    scale_min_k4(2 * c + 1, scales, &sc2, &m2);
    float d1 = d * float(sc1), o1 = dmin * float(m1);
    float d2 = d * float(sc2), o2 = dmin * float(m2);
    for (int l = 0; l < 32; ++l) {
      int lo = qs[l] & 0x0F, hi = qs[l] >> 4;
      if (five_bits) {
        lo |= ((qh[l] >> (2 * c)) & 1) << 4;
        hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
      }
      y[l] = d1 * float(lo) - o1;
      y[l + 32] = d2 * float(hi) - o2;
    }
    qs += 32;
    y += 64;
  }
}

// Q6_K: 2 halves of 128 values, each with 64 bytes of ql, 32 of qh and 8 scales. Value l + 32k
// (l < 32, k = 0..3) takes its low 4 bits from the low (k < 2) or high (k >= 2) nibble of
// ql[l + 32 * (k % 2)], its high 2 bits from bits 2k..2k+1 of qh[l], and scale sc[l / 16 + 2k].
void block_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + kQKK / 2;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + kQKK / 2 + kQKK / 4);
  float d = load_half(b + kQKK / 2 + kQKK / 4 + kQKK / 16);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3FF) << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / nan
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_float(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  for (const Entry& e : kTypes) {
    if (uint32_t(e.type) == type) return &e.info;
  }
  return nullptr;
}

std::string supported_ggml_types() {
  std::string s;
  for (const Entry& e : kTypes) s += (s.empty() ? "" : ", ") + std::string(e.info.name);
  return s;
}

Status dequantize(GgmlType type, const uint8_t* src, int64_t n, float* dst) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  if (info == nullptr) return Status::InvalidArgument("unsupported ggml type");
  if (n % info->block_size != 0) {
    return Status::InvalidArgument(std::to_string(n) + " values are not whole " + info->name +
                                   " blocks of " + std::to_string(info->block_size));
  }
  if (type == GgmlType::kF32) {
    std::memcpy(dst, src, size_t(n) * 4);
    return Status::Ok();
  }
  int64_t blocks = n / info->block_size;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * info->type_size;
    float* y = dst + i * info->block_size;
    switch (type) {
      case GgmlType::kF32:
        std::memcpy(y, b, 4);
        break;
      case GgmlType::kF16:
        *y = load_half(b);
        break;
      case GgmlType::kBF16:
        *y = bf16_to_float(load_u16(b));
        break;
      case GgmlType::kQ8_0:
        block_q8_0(b, y);
        break;
      case GgmlType::kQ4_0:
      case GgmlType::kQ4_1:
        block_q4(b, y, type == GgmlType::kQ4_1);
        break;
      case GgmlType::kQ5_0:
      case GgmlType::kQ5_1:
        block_q5(b, y, type == GgmlType::kQ5_1);
        break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
        block_k45(b, y, type == GgmlType::kQ5_K);
        break;
      case GgmlType::kQ6_K:
        block_q6_k(b, y);
        break;
    }
  }
  return Status::Ok();
}

}  // namespace tlt::model
