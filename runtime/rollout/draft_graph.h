// Recorded drafter forwards for the rollout engine: the EAGLE drafter's level forwards (chain and
// tree) and its catch-up, replayed from CUDA graphs in the GPU flavour (recorded by
// CudaGraphPool::draft_recorder(), in the verify graphs' memory pool), so that drafting on a GPU is
// not bound by launching kernels.
//
// A recorded forward has static shapes and addresses, so DraftGraphs keeps one per key:
//   - the batch B is rounded up to a bucket (powers of two below max_batch, and max_batch); the
//     padding rows read token 0 at position 0 with zero features, see only themselves and write
//     into unused cache slots (the drafter cache's slots [B, Bb)), as the verify graphs' do;
//   - the rest of every input's shape as it is at capture time (tokens (B, N), features (B, N, F)
//     whatever F is, the tree layout (B, N, N) and speculative visibility (B, N, P) when defined),
//     so each arm's levels (chain: N = 1; tree: N = top_k, P growing by level) and each catch-up
//     length get their own graph, and arms of one shape share it.
// A forward runs eagerly instead (and is counted) when it cannot replay: more than max_tokens
// tokens per row (a prompt's catch-up), rows that are not the cache's slots, a write past
// max_seq, or max_graphs shapes already recorded.
// Inside a recorded forward the drafter attends over all max_seq cache positions (the committed
// lengths are read on the device, see KVCache::set_device_lengths); the hidden mask makes it
// equal the eager forward up to the order of floating-point sums.
//
// ForwardRecorder is the seam: CUDA graphs on a device, and an eager recorder (replay reruns the
// forward on the static inputs) so that bucketing, staging and fallback are tested on a CPU.
// Shapes: B rows, Bb bucket (B <= Bb), N tokens per row, F feature width, P speculative entries,
// C model dim.
// Thread safety: one thread (the engine's); replays run in order on the current stream.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/drafter.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/transformer.h"

namespace tlt::rollout {

// One recorded forward: replay() reruns it on the tensors it read when recorded (its static
// inputs), rewriting output() in place.
class RecordedForward {
 public:
  virtual ~RecordedForward() = default;
  virtual void replay() = 0;
  // The static output; the same tensor (storage) after every replay.
  virtual const torch::Tensor& output() const = 0;
};

// Records forwards. record(f) runs f once to warm up, then records it; f must read only tensors
// that outlive the recording and return a fresh tensor. Throws what f throws.
class ForwardRecorder {
 public:
  virtual ~ForwardRecorder() = default;
  virtual std::unique_ptr<RecordedForward> record(const std::function<torch::Tensor()>& f) = 0;
};

// The recorder without graphs (CPU tests, or any device): replay() reruns f and copies its
// result into output().
std::unique_ptr<ForwardRecorder> make_eager_recorder();

// Static copies of a batch's tensors, padded to a bucket of rows: input i is (Bb, shape_i...) and
// its padding rows hold pad_i ((shape_i...), or zeros when pad_i is undefined).
class StaticRows {
 public:
  // like: one tensor per input, (B, shape_i...); pads: one per input (may be undefined).
  StaticRows(const std::vector<torch::Tensor>& like, int64_t bucket,
             std::vector<torch::Tensor> pads);
  // Copies rows [0, B) of each input in; rows [B, Bb) get the pads. Requires B <= Bb and the
  // recorded shapes past the batch dimension.
  void stage(const std::vector<torch::Tensor>& in);
  const std::vector<torch::Tensor>& tensors() const { return static_; }
  int64_t bucket() const { return bucket_; }

 private:
  int64_t bucket_;
  std::vector<torch::Tensor> static_;  // (Bb, shape_i...) each
  std::vector<torch::Tensor> pads_;    // (shape_i...) each, or undefined: zeros
};

struct DraftGraphOptions {
  int64_t max_batch = 16;    // the largest bucket (the engine's max_batch)
  int64_t max_tokens = 32;   // tokens per row beyond which a forward runs eagerly (prompts)
  int64_t max_graphs = 256;  // shapes recorded at most; new ones past it run eagerly
};

// The inputs of one drafter forward over the cache's slots 0..B-1, row b being slot b.
struct DraftInputs {
  torch::Tensor tokens;           // (B, N) int64
  torch::Tensor features;         // (B, N, F)
  torch::Tensor positions;        // (B, N) int64
  model::AttentionLayout layout;  // tree (B, N, N), spec_base (B,), spec_visible (B, N, P)
};

class DraftGraphs {
 public:
  // drafter and cache (the drafter's, slot i = row i) are borrowed and outlive this; the
  // drafter's parameters may change in place, not be replaced.
  DraftGraphs(model::Drafter drafter, model::KVCache* cache,
              std::unique_ptr<ForwardRecorder> recorder, DraftGraphOptions options);
  ~DraftGraphs();
  DraftGraphs(const DraftGraphs&) = delete;
  DraftGraphs& operator=(const DraftGraphs&) = delete;

  // The smallest bucket holding b rows, or -1 when b exceeds max_batch.
  int64_t bucket(int64_t b) const;
  // The token count a catch-up of t pairs per row pads to so that it replays (the next power of
  // two, at most max_tokens), given `start`, the largest position or cache length a row writes
  // from; t itself when the padded forward would run eagerly anyway or pass max_seq.
  int64_t padded_tokens(int64_t t, int64_t start) const;
  // Why `in` would run eagerly ("" when it replays a recorded graph or records one).
  std::string fallback_reason(const DraftInputs& in) const;

  // The drafter's forward of `in` with the cache, as DrafterImpl::forward(tokens, features,
  // positions, cache, layout) returns it: (B, N, C), a tensor of its own. Writes the new keys and
  // values after each slot's committed length without committing them. *replayed (optional):
  // whether a graph replayed (else it ran eagerly). Throws like the eager forward; after a throw
  // during a recording this must not be used again.
  torch::Tensor forward(const DraftInputs& in, bool* replayed = nullptr);

  int64_t graphs() const { return int64_t(graphs_.size()); }
  int64_t replays() const { return replays_; }
  int64_t fallbacks() const { return fallbacks_; }

 private:
  struct Graph;
  static std::vector<torch::Tensor> flatten(const DraftInputs& in, const torch::Tensor& lengths);
  static std::string key_of(int64_t bucket, const DraftInputs& in);
  Graph& record(const std::string& key, const DraftInputs& in,
                const std::vector<torch::Tensor>& flat, int64_t bucket);

  // Constant after construction.
  model::Drafter drafter_;
  model::KVCache* cache_;
  std::unique_ptr<ForwardRecorder> recorder_;
  DraftGraphOptions options_;

  std::map<std::string, std::unique_ptr<Graph>> graphs_;  // shape key -> recorded forward
  int64_t replays_ = 0, fallbacks_ = 0;
};

}  // namespace tlt::rollout
