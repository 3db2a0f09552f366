// GGUF (version 2 and 3), the file format of llama.cpp: header, metadata key/values, tensor table
// and aligned tensor data. Parsing only; runtime/model/gguf_quant.h turns tensor data into
// floats and runtime/model/pretrained.h builds a model from it.
//
// Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv; n_kv times (string key,
// u32 type, value); n_tensors times (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64
// offset); padding to `general.alignment` (default 32); tensor data, each tensor at its offset
// from the start of the data section. A string is a u64 length and that many bytes (no NUL).
// Shapes are ggml's: ne[0] is the contiguous (fastest) dimension, so a PyTorch shape is ne
// reversed.
//
// Every count, length and offset is checked against the bytes there are before it is used, so a
// truncated or hostile file is an error (naming the file and the field), never a crash or a huge
// allocation. Arrays of arrays are parsed and skipped (no tensor loader needs them).
//
// Ownership: a GgufFile from open_gguf() owns its memory map; one from parse_gguf() borrows the
// caller's bytes. Tensor data pointers point into those bytes.
// Thread safety: immutable after parsing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"
#include "runtime/model/gguf_quant.h"
#include "runtime/model/mapped_file.h"

namespace tlt::model {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// One metadata value. Scalars fill the field of their kind (integers both `i` and, when not
// negative, `u`); arrays fill `strings` (string elements) or `numbers` (numeric or bool).
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufType element_type = GgufType::kU8;  // for arrays
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<std::string> strings;
  std::vector<double> numbers;
  uint64_t n_elements = 0;  // for arrays (also for skipped arrays of arrays)
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] contiguous
  uint64_t offset = 0;      // from the start of the data section
  uint64_t n_bytes = 0;     // of its data, from its type and shape
  const uint8_t* data = nullptr;

  int64_t n_elements() const;
  std::vector<int64_t> torch_shape() const { return {ne.rbegin(), ne.rend()}; }
};

class GgufFile {
 public:
  uint32_t version = 0;
  uint64_t alignment = 32;
  std::string path;  // for messages
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensors;

  // nullptr when absent.
  const GgufValue* find(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;

  // Typed metadata getters: NotFound naming the file and key when absent, InvalidArgument when
  // the value has another type. get_uint accepts any non-negative integer type; get_float any
  // number.
  StatusOr<std::string> get_string(const std::string& key) const;
  StatusOr<uint64_t> get_uint(const std::string& key) const;
  StatusOr<double> get_float(const std::string& key) const;
  StatusOr<bool> get_bool(const std::string& key) const;

  std::shared_ptr<const MappedFile> file;  // owner of the bytes when opened from a path
};

// Parses `size` bytes at `data` (borrowed; must outlive the result). `name` labels messages.
// Corruption for a truncated or malformed file (bad magic, a length past the end, an unaligned
// or overlapping-the-end tensor); InvalidArgument for an unknown tensor or value type or an
// unsupported version. Messages name `name` and the field.
StatusOr<GgufFile> parse_gguf(const uint8_t* data, size_t size, const std::string& name);

// Maps `path` and parses it (see parse_gguf); NotFound when the file is missing.
StatusOr<GgufFile> open_gguf(const std::string& path);

}  // namespace tlt::model
