// safetensors, Hugging Face's weight format: u64 header length N, N bytes of JSON
// ({"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [BEGIN, END]}, "__metadata__": {..}}),
// then the tensor bytes, each tensor at [BEGIN, END) from the end of the header, row-major.
//
// Parsing checks every offset against the file and every byte count against dtype x shape, so a
// truncated or hostile header is an error that names the file and the tensor, never a crash.
// Only the float dtypes a model loader needs are accepted (F32, F16, BF16); others are an error
// naming the tensor and its dtype.
//
// Ownership: a SafetensorsFile from open_safetensors() owns its memory map; one from
// parse_safetensors() borrows the caller's bytes. Thread safety: immutable after parsing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"
#include "runtime/model/mapped_file.h"

namespace tlt::model {

enum class SafetensorsDtype { kF32, kF16, kBF16 };

struct SafeTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;  // row-major, as PyTorch
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;
};

struct SafetensorsFile {
  std::string path;  // for messages
  std::vector<SafeTensor> tensors;
  std::shared_ptr<const MappedFile> file;  // owner of the bytes when opened from a path

  const SafeTensor* find(const std::string& name) const;  // nullptr when absent
};

// Corruption for a truncated file, a header that is not JSON or not an object of tensors, or
// offsets past the end; InvalidArgument for an unsupported dtype. Messages name `name` and the
// tensor.
StatusOr<SafetensorsFile> parse_safetensors(const uint8_t* data, size_t size,
                                            const std::string& name);

// Maps `path` and parses it; NotFound when it is missing.
StatusOr<SafetensorsFile> open_safetensors(const std::string& path);

// Converts the tensor's values to float32 into dst (n values, n = product of shape).
void safetensor_to_float(const SafeTensor& t, float* dst);

// One float32 tensor to write: `data` (borrowed) holds product(shape) values, row-major.
struct Float32Tensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// Writes `tensors` as one F32 safetensors file (header padded with spaces to 8 bytes, metadata
// {"format": "pt"}, tensors in the given order) through PATH.tmp and a rename, so PATH is never
// half-written. Unavailable when it cannot be written; InvalidArgument for a repeated name.
Status write_safetensors(const std::string& path, const std::vector<Float32Tensor>& tensors);

}  // namespace tlt::model
