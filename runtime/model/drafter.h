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

#include "api/status.h"
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
  // The keys and values of the levels run so far by forward_level: [layer][level], each
  // (B, Hkv, N_level, D) (positions rotated). Starts empty.
  struct LevelKV {
    std::vector<std::vector<torch::Tensor>> k, v;
  };
  // Unrolled training's forward (drafter/trainer.h), one drafting level per call. Level d's
  // inputs: tokens (B, N) int64, features (B, N, C), positions (B, N), entry j being base j. Entry
  // j attends to entries 0..j of level 1 (the first call) and to entry j of each later level,
  // itself included, which `kv` holds and this call appends to. Returns (B, N, C): what a forward
  // over the levels laid out together under that mask would give level d, at the cost of level
  // d's entries only. N must not exceed level 1's. Gradients flow through `kv`.
  torch::Tensor forward_level(const torch::Tensor& tokens, const torch::Tensor& features,
                              const torch::Tensor& positions, LevelKV* kv);
  // Logits (..., V) of predicted hidden states (..., C) through the target's LM head (training).
  torch::Tensor logits(const torch::Tensor& hidden);
  // Logits (..., V) for drafting: over the draft vocabulary only (-inf elsewhere) when one is
  // set, else as logits(). With K draft tokens the head costs K/V of the full one; the target
  // still verifies over the full vocabulary, so speculation stays lossless.
  torch::Tensor draft_logits(const torch::Tensor& hidden);
  // The same logits over the draft vocabulary alone, without the -inf columns: (..., K), column
  // j being token draft_vocab()[j]; with no draft vocabulary, logits(). Drafting reads these when
  // it only needs a row's best tokens or its race (runtime/rollout/draft_eagle_chain.cc).
  torch::Tensor subset_logits(const torch::Tensor& hidden);
  // The draft vocabulary (K) int64 on the target's device; undefined when there is none.
  const torch::Tensor& draft_vocab() const { return draft_vocab_; }
  // The LM-head rows the drafter drafts over, detached: (K, C) with a draft vocabulary (ids in
  // its order), else the whole head (V, C). Training's soft cross-entropy runs over these.
  torch::Tensor draft_head();
  // ids (K) int64, distinct, in [0, V); an undefined tensor (or K >= V) restores the full
  // vocabulary. InvalidArgument on ids out of range or repeated.
  Status set_draft_vocab(const torch::Tensor& ids);
  int64_t draft_vocab_size() const;  // K, or V when unrestricted
  std::unique_ptr<KVCache> make_cache(int64_t max_batch, int64_t max_seq) const;

  torch::nn::Linear fc{nullptr};  // (C, 2C)
  torch::nn::ModuleList layers{nullptr};

 private:
  Transformer target_;  // not registered: its parameters are not the drafter's
  int64_t n_layers_;
  torch::Tensor draft_vocab_;  // (K) int64 on the target's device; undefined: full vocabulary
  // LM-head rows of draft_vocab_ (K, C), re-gathered whenever the target's head changes (new
  // policy weights): keyed on its storage and in-place version counter.
  torch::Tensor draft_rows_;
  const void* rows_ptr_ = nullptr;
  int64_t rows_version_ = -1;
};
TORCH_MODULE(Drafter);

// The `n` most frequent token ids of `counts` (index = token id; ties to the lower id), as a
// (n) int64 tensor; undefined when n <= 0 or n >= counts.size() (no restriction).
torch::Tensor most_frequent_tokens(const std::vector<int64_t>& counts, int64_t n);

}  // namespace tlt::model
