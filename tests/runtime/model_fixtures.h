// Where the real-model tests find their files: the committed fixtures of tests/models (written
// by the scripts there) and SmolLM2-135M-Instruct, which scripts/setup.sh fetches.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace tlt::testing {

inline const std::string kModelFixtures = std::string(TLT_SOURCE_DIR) + "/tests/models/fixtures";

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// ~/.cache/tlt/REST
inline std::string tlt_cache(const std::string& rest) {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/tlt/" + rest;
}

// $TLT_SMOLLM2_GGUF, else where scripts/setup.sh puts SmolLM2.
inline std::string smollm2_path() {
  const char* env = std::getenv("TLT_SMOLLM2_GGUF");
  return env ? env : tlt_cache("models/SmolLM2-135M-Instruct.Q4_1.gguf");
}

// $TLT_SMOLLM2_HF, else where scripts/setup.sh converts SmolLM2 to a Hugging Face directory.
inline std::string smollm2_hf_path() {
  const char* env = std::getenv("TLT_SMOLLM2_HF");
  return env ? env : tlt_cache("models/SmolLM2-135M-Instruct-hf");
}

}  // namespace tlt::testing
