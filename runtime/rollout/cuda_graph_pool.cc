// CUDA graphs of the verify forward (see cuda_graph_pool.h). Capture follows PyTorch's recipe:
// warm up once eagerly on a side stream (cuBLAS handles, workspaces and the rope tables' device
// copies are created there, outside the capture), then capture the same forward on that stream.
#include "runtime/rollout/cuda_graph_pool.h"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>

namespace tlt::rollout {

struct CudaGraphPool::Graph {
  at::cuda::CUDAGraph graph;
  // Static inputs, written before every replay.
  torch::Tensor tokens, positions;  // (Bb, N) int64
  torch::Tensor lengths;            // (Bb,) int64: committed length of each row's slot
  torch::Tensor tree;               // (Bb, N, N) bool
  model::ForwardResult out;         // static outputs: (Bb, N, V) logits, (Bb, N, C) hidden
};

namespace {

// Clears the cache's static mode however the capture ends.
struct DeviceLengths {
  DeviceLengths(model::KVCache* cache, torch::Tensor lengths) : cache_(cache) {
    cache_->set_device_lengths(std::move(lengths));
  }
  ~DeviceLengths() { cache_->clear_device_lengths(); }
  DeviceLengths(const DeviceLengths&) = delete;
  DeviceLengths& operator=(const DeviceLengths&) = delete;
  model::KVCache* cache_;
};

// PyTorch's recipe: f once eagerly on a side stream (cuBLAS handles, workspaces, the rope tables'
// device copies are made there, outside the capture), then f captured into `graph` on that stream
// in memory pool `pool`. Returns the captured call's result (the graph's static output).
template <typename F>
auto capture(at::cuda::CUDAGraph& graph, c10::MempoolId_t pool, torch::Device device, F&& f) {
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device.index());
  c10::cuda::getCurrentCUDAStream(device.index()).synchronize();  // staged inputs are ready
  decltype(f()) out;
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    f();  // warm-up
    side.synchronize();
    graph.capture_begin(pool);
    out = f();
    graph.capture_end();
  }
  side.synchronize();
  return out;
}

class CudaRecorded : public RecordedForward {
 public:
  void replay() override { graph.replay(); }
  const torch::Tensor& output() const override { return out; }
  at::cuda::CUDAGraph graph;
  torch::Tensor out;
};

class CudaRecorder : public ForwardRecorder {
 public:
  CudaRecorder(c10::MempoolId_t pool, torch::Device device) : pool_(pool), device_(device) {}
  std::unique_ptr<RecordedForward> record(const std::function<torch::Tensor()>& f) override {
    auto r = std::make_unique<CudaRecorded>();
    r->out = capture(r->graph, pool_, device_, f);
    return r;
  }

 private:
  c10::MempoolId_t pool_;
  torch::Device device_;
};

// Rows [0, B) of every defined field of a graph's static outputs (views).
model::ForwardResult rows_of(const model::ForwardResult& out, int64_t b) {
  // A field added to ForwardResult is a static output of the graph too: narrow it here as well.
  static_assert(sizeof(model::ForwardResult) == 3 * sizeof(torch::Tensor),
                "ForwardResult has a new field: return its rows [0, B) in rows_of");
  model::ForwardResult r = out;
  for (torch::Tensor* t : {&r.logits, &r.hidden, &r.features}) {
    if (t->defined()) *t = t->narrow(0, 0, b);
  }
  return r;
}

}  // namespace

CudaGraphPool::CudaGraphPool(model::Transformer target, model::KVCache* cache)
    : target_(std::move(target)),
      cache_(cache),
      device_(target_->lm_head->weight.device()),
      pool_(at::cuda::graph_pool_handle()) {
  if (!device_.is_cuda()) throw std::invalid_argument("CudaGraphPool: the target is not on CUDA");
  for (int64_t b = 1; b < cache_->max_batch(); b *= 2) buckets_.push_back(b);
  buckets_.push_back(cache_->max_batch());
}

CudaGraphPool::~CudaGraphPool() = default;

std::unique_ptr<ForwardRecorder> CudaGraphPool::draft_recorder() const {
  return std::make_unique<CudaRecorder>(pool_, device_);
}

int64_t CudaGraphPool::bucket(int64_t b) const {
  for (int64_t bb : buckets_) {
    if (b <= bb) return bb;
  }
  throw std::invalid_argument("CudaGraphPool: " + std::to_string(b) + " rows exceed max_batch " +
                              std::to_string(buckets_.back()));
}

model::ForwardResult CudaGraphPool::forward(const torch::Tensor& tokens,
                                            const torch::Tensor& positions,
                                            const torch::Tensor& tree) {
  int64_t b = tokens.size(0), n = tokens.size(1);
  if (b != cache_->n_slots()) {
    throw std::invalid_argument("CudaGraphPool: " + std::to_string(b) + " rows for " +
                                std::to_string(cache_->n_slots()) + " cache slots");
  }
  int64_t bb = bucket(b);
  std::vector<int64_t> host(bb, 0);  // padding rows: length 0 in unused slots
  for (int64_t i = 0; i < b; ++i) host[i] = cache_->length(i);
  torch::Tensor lengths = torch::tensor(host, torch::kInt64).to(device_);  // (Bb,)
  auto it = graphs_.find({bb, n});
  Graph& g = it != graphs_.end() ? *it->second : graph_for(bb, n, lengths);
  stage(g, tokens, positions, tree, lengths);
  g.graph.replay();
  ++replays_;
  return rows_of(g.out, b);
}

// Rows [0, B) from the caller; padding rows [B, Bb) read token 0 at position 0 and see only
// themselves (a row that sees nothing would softmax to NaN).
void CudaGraphPool::stage(Graph& g, const torch::Tensor& tokens, const torch::Tensor& positions,
                          const torch::Tensor& tree, const torch::Tensor& lengths) {
  int64_t b = tokens.size(0), bb = g.tokens.size(0), n = g.tokens.size(1);
  g.tokens.narrow(0, 0, b).copy_(tokens);
  g.positions.narrow(0, 0, b).copy_(positions);
  g.tree.narrow(0, 0, b).copy_(tree);
  if (b < bb) {
    g.tokens.narrow(0, b, bb - b).zero_();
    g.positions.narrow(0, b, bb - b).zero_();
    g.tree.narrow(0, b, bb - b).copy_(torch::eye(n, g.tree.options()).expand({bb - b, n, n}));
  }
  g.lengths.copy_(lengths);
}

CudaGraphPool::Graph& CudaGraphPool::graph_for(int64_t bb, int64_t n,
                                               const torch::Tensor& lengths) {
  auto g = std::make_unique<Graph>();
  auto long_opts = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  g->tokens = torch::zeros({bb, n}, long_opts);
  g->positions = torch::zeros({bb, n}, long_opts);
  g->lengths = torch::zeros({bb}, long_opts);
  g->tree = torch::eye(n, long_opts.dtype(torch::kBool)).expand({bb, n, n}).contiguous();
  // The warm-up really runs: it writes keys/values after each slot's committed length (what the
  // replay writes next anyway), never over committed positions.
  g->lengths.copy_(lengths);
  model::AttentionLayout layout;
  layout.tree = g->tree;
  {
    DeviceLengths static_mode(cache_, g->lengths);
    g->out = capture(g->graph, pool_, device_,
                     [&] { return target_->forward(g->tokens, g->positions, cache_, layout); });
  }
  ++captures_;
  Graph& ref = *g;
  graphs_[{bb, n}] = std::move(g);
  return ref;
}

}  // namespace tlt::rollout
