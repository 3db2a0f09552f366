// FNV-1a 64-bit hashing: checksums of checkpoints and token files, and deterministic,
// order-free splits by name. Header-only and dependency-free (the LibTorch core uses it too).
// Not cryptographic: it detects damage, not tampering.
#pragma once

#include <cstdint>
#include <string>

namespace tlt {

inline uint64_t fnv1a64(const std::string& data, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace tlt
