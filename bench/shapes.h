// Model shapes and exits the benches share (no LibTorch state, header only).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "api/status.h"
#include "runtime/model/config.h"

namespace tlt::bench {

// SmolLM2-135M's shape (its config.json): the benches time its layers with random weights when
// the real model is not cached, since the cost of a forward does not depend on the weights.
inline model::ModelConfig smollm2_135m_shape(int64_t max_seq = 2048) {
  model::ModelConfig c;
  c.vocab = 49152, c.dim = 576, c.n_layers = 30, c.n_heads = 9, c.n_kv_heads = 3, c.ffn = 1536;
  c.max_seq = max_seq, c.rope_theta = 100000.0, c.tied_embeddings = true;
  return c;
}

// A bench's setup step that cannot go on: prints "PROGRAM: WHAT: message" and exits 1.
inline void check_or_exit(const Status& s, const char* program, const std::string& what) {
  if (s.ok()) return;
  std::cerr << program << ": " << what << ": " << s.message() << "\n";
  std::exit(1);
}

}  // namespace tlt::bench
