// ggml's tensor types and their dequantisation to float32, written from the block formats'
// definitions (ggml-common.h in llama.cpp defines the structs; this file shares no code with it).
//
// A quantised tensor is a sequence of blocks of `block_size` consecutive values; each block stores
// its own scale(s) and packed integers:
//   Q8_0  32 values: f16 d, i8 q[32]                          x = d * q
//   Q4_0  32 values: f16 d, u8 qs[16] (two 4-bit q per byte)  x = d * (q - 8)
//   Q4_1  32 values: f16 d, f16 m, u8 qs[16]                  x = d * q + m
//   Q5_0  32 values: f16 d, u8 qh[4] (5th bits), u8 qs[16]    x = d * (q - 16)
//   Q5_1  32 values: f16 d, f16 m, u8 qh[4], u8 qs[16]        x = d * q + m
//   Q4_K  256 values in 8 sub-blocks of 32: f16 d, f16 dmin, 12 bytes of 6-bit (scale, min) pairs,
//         u8 qs[128]                                          x = d * sc * q - dmin * m
//   Q5_K  as Q4_K plus u8 qh[32] holding each value's 5th bit
//   Q6_K  256 values in 16 sub-blocks of 16: u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits),
//         i8 scales[16], f16 d                                x = d * scale * (q - 32)
// In the 32-value formats, byte j holds value j (low nibble) and value j + 16 (high nibble).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/status.h"

namespace tlt::model {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

struct GgmlTypeInfo {
  const char* name;    // "Q4_K"
  int64_t block_size;  // values per block
  int64_t type_size;   // bytes per block
};

// The info of ggml type number `type`, or nullptr when tlt cannot read that type.
const GgmlTypeInfo* ggml_type_info(uint32_t type);

// "F32, F16, BF16, Q4_0, ..." for messages.
std::string supported_ggml_types();

// Writes the `n` values encoded at `src` (n / block_size blocks of `type`) to `dst` as float32.
// InvalidArgument when n is not a multiple of the type's block size.
Status dequantize(GgmlType type, const uint8_t* src, int64_t n, float* dst);

// IEEE half and bfloat16 to float.
float half_to_float(uint16_t h);
float bf16_to_float(uint16_t h);

}  // namespace tlt::model
