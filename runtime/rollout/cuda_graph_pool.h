// CUDA graphs of the target's verify forward, for the rollout engine (GPU flavour only: compiled
// with TLT_GPU, used when the target is on a CUDA device).
//
// Speculative verification runs one forward shape over and over: B requests with N draft nodes
// each. For the small models and batches of the long tail, launching its few dozen kernels from
// the host costs more than running them; a captured CUDA graph replays them in one launch.
// Graphs have static shapes and addresses, so the pool keeps one graph per (batch bucket, N):
//   - B is rounded up to a bucket (powers of two up to the cache's max_batch, and max_batch);
//     the padding rows attend to themselves only and write into unused cache slots;
//   - N is the arm's verified-token count, so arms that verify the same count (4_1_5 and 2_2_5)
//     share one graph;
//   - every graph allocates from one memory pool (at::cuda::graph_pool_handle): intermediates
//     are live only during their own replay, so the pool holds about one forward's activations
//     plus each graph's outputs, not one full forward per graph.
// The forward inside a graph attends over all max_seq cache positions (the committed lengths are
// read on the device at replay time, see KVCache::set_device_lengths), which costs a little more
// attention than the eager forward's max(length) + N span.
//
// Plain decode steps replay the graph of N = 1 (a one-node tree is the causal layout).
// Drafting forwards are recorded by draft_recorder() into the same memory pool (draft_graph.h);
// prefill stays eager.
// Shapes: B rows, Bb bucket (B <= Bb), N tokens per row, V vocab, C dim.
//
// Thread safety: one thread (the engine's). Replays of graphs that share the memory pool must not
// overlap; they run in order on the current CUDA stream.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/model/kv_cache.h"
#include "runtime/model/transformer.h"
#include "runtime/rollout/draft_graph.h"

namespace tlt::rollout {

class CudaGraphPool {
 public:
  // target: on a CUDA device, in eval mode; cache: the target's (its slot i is row i). Both are
  // borrowed and must outlive the pool. Graphs read the parameters' memory: updating weights in
  // place between calls is fine; replacing a parameter tensor needs a new pool.
  CudaGraphPool(model::Transformer target, model::KVCache* cache);
  ~CudaGraphPool();
  CudaGraphPool(const CudaGraphPool&) = delete;
  CudaGraphPool& operator=(const CudaGraphPool&) = delete;

  // The smallest bucket that holds b rows (1 <= b <= the cache's max_batch).
  int64_t bucket(int64_t b) const;

  // The verify forward of rows 0..B-1 = cache slots 0..B-1 (B = the cache's n_slots()): tokens,
  // positions (B, N) int64 and tree (B, N, N) bool, on the target's device. Row b writes its N
  // keys/values after slot b's committed length and attends to that prefix and to the nodes
  // tree[b] allows, exactly as TransformerImpl::forward with the cache would. The first call for
  // a (bucket, N) runs one eager warm-up forward and captures the graph; later ones replay it.
  // Returns views of rows [0, B) of every field of the graph's static outputs ((B, N, V) logits,
  // (B, N, C) hidden), valid until the next call. Throws (c10::Error, std::invalid_argument) like
  // the eager forward; after a throw the pool must not be used again.
  model::ForwardResult forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                               const torch::Tensor& tree);

  // A recorder of CUDA graphs in this pool's memory pool, for the drafter's forwards
  // (DraftGraphs); it may outlive the pool. Its recordings follow the same recipe as the verify
  // graphs (warm-up, then capture, on a side stream).
  std::unique_ptr<ForwardRecorder> draft_recorder() const;

  int64_t graphs() const { return int64_t(graphs_.size()); }
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }

 private:
  struct Graph;
  Graph& graph_for(int64_t bucket, int64_t n, const torch::Tensor& lengths);
  void stage(Graph& g, const torch::Tensor& tokens, const torch::Tensor& positions,
             const torch::Tensor& tree, const torch::Tensor& lengths);

  // Constant after construction.
  model::Transformer target_;
  model::KVCache* cache_;
  torch::Device device_;
  std::vector<int64_t> buckets_;  // increasing; the last is the cache's max_batch
  c10::MempoolId_t pool_;         // the memory pool all graphs share

  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Graph>> graphs_;  // (bucket, N) -> graph
  int64_t captures_ = 0, replays_ = 0;
};

}  // namespace tlt::rollout
