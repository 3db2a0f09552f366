// FNV-1a 64-bit hashing: checksums of checkpoints and token files, and deterministic,
// order-free splits by name. Header-only and dependency-free (the LibTorch core uses it too).
// Not cryptographic: it detects damage, not tampering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tlt {

inline constexpr uint64_t kFnv1a64Offset = 1469598103934665603ull;

// Bytes [data, data + n); pass a previous result as h to hash a stream chunk by chunk (the
// chunks' hash equals the whole's).
inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Offset) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline uint64_t fnv1a64(const std::string& data, uint64_t h = kFnv1a64Offset) {
  return fnv1a64(data.data(), data.size(), h);
}

}  // namespace tlt
