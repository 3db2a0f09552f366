// Fuzz target: any bytes given to the GGUF or the safetensors header parser must give a file or an
// error, never a crash, leak, hang or huge allocation; and every tensor of a file that parses must
// lie inside the input (its data is read: ASan catches a byte out of bounds). The first input byte
// picks the parser, so one corpus holds both formats.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/model/gguf.h"
#include "runtime/model/safetensors.h"

namespace {

volatile uint8_t sink;

void touch(const uint8_t* p, uint64_t n) {
  if (n > 0) sink = p[0] ^ p[n - 1];
}

void fuzz_gguf(const uint8_t* data, size_t size) {
  tlt::StatusOr<tlt::model::GgufFile> f = tlt::model::parse_gguf(data, size, "fuzz.gguf");
  if (!f.ok()) return;
  for (const tlt::model::GgufTensor& t : f->tensors) {
    touch(t.data, t.n_bytes);
    if (t.n_elements() <= 4096) {  // dequantise small tensors whole
      std::vector<float> out(size_t(t.n_elements()));
      tlt::Status st = tlt::model::dequantize(t.type, t.data, t.n_elements(), out.data());
      if (!st.ok()) std::abort();  // the parser checked the block size
    }
  }
}

void fuzz_safetensors(const uint8_t* data, size_t size) {
  tlt::StatusOr<tlt::model::SafetensorsFile> f =
      tlt::model::parse_safetensors(data, size, "fuzz.safetensors");
  if (!f.ok()) return;
  for (const tlt::model::SafeTensor& t : f->tensors) {
    touch(t.data, t.n_bytes);
    if (t.n_bytes <= 16384) {
      std::vector<float> out(t.n_bytes / 2 + 1);
      tlt::model::safetensor_to_float(t, out.data());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) {
    fuzz_safetensors(data + 1, size - 1);
  } else {
    fuzz_gguf(data + 1, size - 1);
  }
  return 0;
}
