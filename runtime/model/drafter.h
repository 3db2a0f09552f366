// EAGLE-style drafter: fc(concat(embed(token), f)) (2C -> C), then decoder layer(s).
//
// Input pair j is (h_j, t_{j+1}): the target's feature at position j and the token that followed
// it; the output at j predicts the target's next hidden state (h_{j+1}, which the `last` drafter
// regresses) and the target's own LM head turns it into a guess for t_{j+2}. The embedding and LM
// head are the target's, frozen (no gradient reaches them); only the drafter's own modules train.
//
// Feature modes (spec.drafter.features):
//   kLast  (EAGLE-1/2): f is the target's final hidden state (C).
//   kFused (EAGLE-3): the target exports the outputs of a low, a middle and its final layer
//          (ForwardResult::features, 3C; TransformerImpl::feature_layers), and
//          f = fuse(concat(rms(low), rms(mid), final)) (3C -> C), rms being a weightless RMS
//          normalisation of the two residual-stream features (their scale differs by layer).
//          fuse starts as [0 | 0 | I]: the untrained fused drafter is the untrained `last` one.
// Either way a C-wide feature is used as f directly: the drafter's own prediction, which drafting
// feeds back from level 2 of a chain on (in place of the fused feature, as EAGLE-3 does), or the
// target's final hidden state. A 3C-wide feature is the target's fused export: the fused drafter
// fuses it, the `last` drafter reads its last C columns (the final hidden state). So a target that
// exports fused features serves both kinds of drafter, and level >= 2 inputs are always valid.
//
// Thread safety: one thread at a time. The drafter keeps a handle to the target; the target
// must outlive it.
#pragma once

#include <torch/torch.h>

#include <string>

#include "api/status.h"
#include "runtime/model/transformer.h"

namespace tlt::model {

enum class DrafterFeatures { kLast, kFused };

// "last" / "fused" (spec.drafter.features); InvalidArgument otherwise.
StatusOr<DrafterFeatures> parse_drafter_features(const std::string& name);
const char* drafter_features_name(DrafterFeatures f);

class DrafterImpl : public torch::nn::Module {
 public:
  // kFused turns on the target's fused feature export (TransformerImpl::set_export_features).
  DrafterImpl(Transformer target, int64_t n_layers,
              DrafterFeatures features = DrafterFeatures::kLast);

  DrafterFeatures features_mode() const { return features_; }
  bool fused() const { return features_ == DrafterFeatures::kFused; }

  // tokens (B, T) int64, features (B, T, F) with F = C or 3C (see the feature modes above),
  // positions (B, T).
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
  // inputs: tokens (B, N) int64, features (B, N, F), positions (B, N), entry j being base j. Entry
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

  torch::nn::Linear fc{nullptr};    // (C, 2C)
  torch::nn::Linear fuse{nullptr};  // (C, 3C); kFused only (null under kLast)
  torch::nn::ModuleList layers{nullptr};

 private:
  // The feature f (B, T, C) the drafter reads for features (B, T, C or 3C): see the modes above.
  torch::Tensor feature_input(const torch::Tensor& features);
  // fc(concat(embed(tokens), feature_input(features))): (B, T, C).
  torch::Tensor input(const torch::Tensor& tokens, const torch::Tensor& features);

  Transformer target_;  // not registered: its parameters are not the drafter's
  int64_t n_layers_;
  DrafterFeatures features_;
  torch::Tensor draft_vocab_;  // (K) int64 on the target's device; undefined: full vocabulary
  // LM-head rows of draft_vocab_ (K, C), re-gathered whenever the target's head changes (new
  // policy weights): keyed on its storage and in-place version counter.
  torch::Tensor draft_rows_;
  const void* rows_ptr_ = nullptr;
  int64_t rows_version_ = -1;
};
TORCH_MODULE(Drafter);

// The target's final hidden states (..., C) in `features` (..., C or 3C): its last C columns.
torch::Tensor final_hidden(const torch::Tensor& features, int64_t dim);

// Whether the checkpoint at `path` holds a drafter of `drafter`'s feature mode; InvalidArgument
// naming both modes and the fix when not; errors of read_checkpoint_metadata otherwise. A fused
// drafter's checkpoint is the one with a "fuse.weight" tensor.
Status check_drafter_checkpoint(const Drafter& drafter, const std::string& path);
// check_drafter_checkpoint, then model::load_checkpoint; returns the metadata.
StatusOr<std::string> load_drafter_checkpoint(Drafter& drafter, const std::string& path);

// The `n` most frequent token ids of `counts` (index = token id; ties to the lower id), as a
// (n) int64 tensor; undefined when n <= 0 or n >= counts.size() (no restriction).
torch::Tensor most_frequent_tokens(const std::vector<int64_t>& counts, int64_t n);

}  // namespace tlt::model
