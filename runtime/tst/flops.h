// FLOP accounting for a training step (forward + backward = 3 x forward), counted the same way
// for both TST phases and the baseline: the transformer always processes B x L positions, so
// the count depends on the model, B and L only. Matmuls cost 2 FLOPs per multiply-add; per
// position a forward costs 2 x (matmul parameters, LM head included) plus 4 x L x C per layer
// for attention scores and values. Bag averaging (B x L x s x C additions) is not a matmul and
// is reported separately by bag_mean_flops() so it can be compared (it is < 0.1% here).
#pragma once

#include <cstdint>

#include "runtime/model/config.h"

namespace tlt::tst {

inline int64_t matmul_parameters(const model::ModelConfig& c) {
  int64_t d = c.head_dim();
  int64_t attn = c.dim * (c.n_heads * d) + 2 * c.dim * (c.n_kv_heads * d) + (c.n_heads * d) * c.dim;
  return c.n_layers * (attn + 3 * c.dim * c.ffn) + c.vocab * c.dim;
}

inline double train_step_flops(const model::ModelConfig& c, int64_t batch, int64_t positions) {
  double per_position = 2.0 * double(matmul_parameters(c)) +
                        4.0 * double(positions) * double(c.dim) * double(c.n_layers);
  return 3.0 * per_position * double(batch) * double(positions);
}

inline double bag_mean_flops(const model::ModelConfig& c, int64_t batch, int64_t positions,
                             int64_t bag) {
  return double(batch) * double(positions) * double(bag) * double(c.dim);
}

}  // namespace tlt::tst
