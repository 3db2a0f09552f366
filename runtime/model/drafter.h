// EAGLE-style drafter: fc(concat(embed(token), h_target)) (2C -> C), then decoder layer(s).
//
// Input pair j is (h_j, t_{j+1}): the target's final hidden state at position j and the token
// that followed it; the output at j predicts h_{j+1}, and the target's own LM head turns that into
// a guess for t_{j+2}. The embedding and LM head are the target's, frozen (no gradient reaches
// them); only fc and the drafter layers train. Shapes: legend in runtime/model/config.h.
//
// Thread safety: one thread at a time. The drafter keeps a handle to the target; the target
// must outlive it.
#pragma once

#include <torch/torch.h>

#include "runtime/model/transformer.h"

namespace tlt::model {

class DrafterImpl : public torch::nn::Module {
 public:
  DrafterImpl(Transformer target, int64_t n_layers);

  // tokens (B, T) int64, features (B, T, C) target hidden states, positions (B, T).
  // Returns the predicted next hidden states (B, T, C).
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& features,
                        const torch::Tensor& positions, KVCache* cache = nullptr,
                        const AttentionLayout& layout = {});
  // Logits (..., V) of predicted hidden states (..., C) through the target's LM head.
  torch::Tensor logits(const torch::Tensor& hidden);
  std::unique_ptr<KVCache> make_cache(int64_t max_batch, int64_t max_seq) const;

  torch::nn::Linear fc{nullptr};  // (C, 2C)
  torch::nn::ModuleList layers{nullptr};

 private:
  Transformer target_;  // not registered: its parameters are not the drafter's
  int64_t n_layers_;
};
TORCH_MODULE(Drafter);

}  // namespace tlt::model
