// Recorded drafter forwards (see draft_graph.h): keys, static staging, eager fallback.
#include "runtime/rollout/draft_graph.h"

#include <sstream>
#include <stdexcept>

namespace tlt::rollout {

namespace {

// Replays by rerunning the forward: the CPU stand-in for a CUDA graph, with its static output.
class EagerRecorded : public RecordedForward {
 public:
  EagerRecorded(std::function<torch::Tensor()> f, torch::Tensor out)
      : f_(std::move(f)), out_(std::move(out)) {}
  void replay() override { out_.copy_(f_()); }
  const torch::Tensor& output() const override { return out_; }

 private:
  std::function<torch::Tensor()> f_;
  torch::Tensor out_;
};

class EagerRecorder : public ForwardRecorder {
 public:
  std::unique_ptr<RecordedForward> record(const std::function<torch::Tensor()>& f) override {
    f();  // warm-up, as a CUDA recording runs one
    return std::make_unique<EagerRecorded>(f, f());
  }
};

// The cache's static mode (lengths read from `lengths` on the device) while alive.
class StaticMode {
 public:
  StaticMode(model::KVCache* cache, torch::Tensor lengths) : cache_(cache) {
    cache_->set_device_lengths(std::move(lengths));
  }
  ~StaticMode() { cache_->clear_device_lengths(); }
  StaticMode(const StaticMode&) = delete;
  StaticMode& operator=(const StaticMode&) = delete;

 private:
  model::KVCache* cache_;
};

// The flattened inputs' order: tokens, features, positions, lengths, then tree, spec_base and
// spec_visible when the layout defines them.
constexpr size_t kTokens = 0, kFeatures = 1, kPositions = 2, kLengths = 3;

}  // namespace

std::unique_ptr<ForwardRecorder> make_eager_recorder() {
  return std::make_unique<EagerRecorder>();
}

StaticRows::StaticRows(const std::vector<torch::Tensor>& like, int64_t bucket,
                       std::vector<torch::Tensor> pads)
    : bucket_(bucket), pads_(std::move(pads)) {
  if (pads_.size() != like.size()) throw std::invalid_argument("StaticRows: one pad per input");
  for (const torch::Tensor& t : like) {
    std::vector<int64_t> shape = t.sizes().vec();
    shape[0] = bucket;
    static_.push_back(torch::zeros(shape, t.options()));  // (Bb, shape_i...)
  }
}

void StaticRows::stage(const std::vector<torch::Tensor>& in) {
  int64_t b = in.at(0).size(0);
  if (b > bucket_ || in.size() != static_.size())
    throw std::invalid_argument("StaticRows: " + std::to_string(b) + " rows for a bucket of " +
                                std::to_string(bucket_));
  for (size_t i = 0; i < in.size(); ++i) {
    static_[i].narrow(0, 0, b).copy_(in[i]);
    if (b == bucket_) continue;
    torch::Tensor rest = static_[i].narrow(0, b, bucket_ - b);  // (Bb - B, shape_i...)
    if (pads_[i].defined()) {
      rest.copy_(pads_[i].unsqueeze(0).expand_as(rest));
    } else {
      rest.zero_();
    }
  }
}

struct DraftGraphs::Graph {
  Graph(const std::vector<torch::Tensor>& like, int64_t bucket, std::vector<torch::Tensor> pads)
      : rows(like, bucket, std::move(pads)) {}
  StaticRows rows;
  std::unique_ptr<RecordedForward> forward;
  bool tree = false, spec = false;  // which layout fields the inputs define
};

DraftGraphs::DraftGraphs(model::Drafter drafter, model::KVCache* cache,
                         std::unique_ptr<ForwardRecorder> recorder, DraftGraphOptions options)
    : drafter_(std::move(drafter)),
      cache_(cache),
      recorder_(std::move(recorder)),
      options_(options) {
  if (options_.max_batch > cache_->max_batch())
    throw std::invalid_argument("DraftGraphs: max_batch exceeds the cache's");
}

DraftGraphs::~DraftGraphs() = default;

int64_t DraftGraphs::bucket(int64_t b) const {
  if (b < 1 || b > options_.max_batch) return -1;
  int64_t bb = 1;
  while (bb < b) bb *= 2;
  return std::min(bb, options_.max_batch);
}

int64_t DraftGraphs::padded_tokens(int64_t t, int64_t start) const {
  if (t > options_.max_tokens) return t;
  int64_t p = 1;
  while (p < t) p *= 2;
  p = std::min(p, options_.max_tokens);
  return start + p <= cache_->max_seq() ? p : t;
}

std::string DraftGraphs::fallback_reason(const DraftInputs& in) const {
  int64_t b = in.tokens.size(0), n = in.tokens.size(1);
  int64_t bb = bucket(b);
  if (bb < 0) return "more rows than max_batch";
  if (b != cache_->n_slots()) return "rows are not the cache's slots";
  if (n > options_.max_tokens) return "more tokens per row than max_tokens";
  const model::AttentionLayout& l = in.layout;
  if (l.rows.defined() || l.prefix || l.record) return "a layout a recorded forward does not take";
  for (int64_t i = 0; i < b; ++i) {
    if (cache_->length(i) + n > cache_->max_seq()) return "a write past max_seq";
  }
  if (graphs_.size() >= size_t(options_.max_graphs) && !graphs_.count(key_of(bb, in)))
    return "max_graphs shapes recorded";
  return "";
}

std::vector<torch::Tensor> DraftGraphs::flatten(const DraftInputs& in,
                                                const torch::Tensor& lengths) {
  std::vector<torch::Tensor> flat{in.tokens, in.features, in.positions, lengths};
  if (in.layout.tree.defined()) flat.push_back(in.layout.tree.to(torch::kBool));
  if (in.layout.spec_base.defined()) {
    flat.push_back(in.layout.spec_base);
    flat.push_back(in.layout.spec_visible.to(torch::kBool));
  }
  return flat;
}

// The bucket, then each input's dtype and shape past the batch dimension (absent ones: "-").
std::string DraftGraphs::key_of(int64_t bucket, const DraftInputs& in) {
  std::ostringstream key;
  key << bucket;
  for (const torch::Tensor* t : {&in.tokens, &in.features, &in.positions, &in.layout.tree,
                                 &in.layout.spec_base, &in.layout.spec_visible}) {
    key << '|';
    if (!t->defined()) {
      key << '-';
      continue;
    }
    key << c10::toString(t->scalar_type());
    for (int64_t d = 1; d < t->dim(); ++d) key << ',' << t->size(d);
  }
  return key.str();
}

torch::Tensor DraftGraphs::forward(const DraftInputs& in, bool* replayed) {
  if (replayed) *replayed = false;
  if (!fallback_reason(in).empty()) {
    ++fallbacks_;
    return drafter_->forward(in.tokens, in.features, in.positions, cache_, in.layout);
  }
  int64_t b = in.tokens.size(0), bb = bucket(b);
  std::vector<int64_t> host(b);
  for (int64_t i = 0; i < b; ++i) host[i] = cache_->length(i);
  torch::Tensor lengths = torch::tensor(host, torch::kInt64).to(in.tokens.device());  // (B,)
  std::vector<torch::Tensor> flat = flatten(in, lengths);
  std::string key = key_of(bb, in);
  auto it = graphs_.find(key);
  Graph& g = it != graphs_.end() ? *it->second : record(key, in, flat, bb);
  g.rows.stage(flat);
  g.forward->replay();
  ++replays_;
  if (replayed) *replayed = true;
  return g.forward->output().narrow(0, 0, b).clone();  // (B, N, C)
}

// Stages the first inputs before recording: the warm-up really runs and writes keys and values
// after each slot's committed length (what the replay writes next anyway).
DraftGraphs::Graph& DraftGraphs::record(const std::string& key, const DraftInputs& in,
                                        const std::vector<torch::Tensor>& flat, int64_t bb) {
  int64_t n = in.tokens.size(1);
  std::vector<torch::Tensor> pads(flat.size());  // undefined: zeros
  // Padding rows see themselves only (a row that sees nothing would softmax to NaN).
  if (in.layout.tree.defined()) pads[kLengths + 1] = torch::eye(n, flat[kLengths + 1].options());
  auto g = std::make_unique<Graph>(flat, bb, std::move(pads));
  g->tree = in.layout.tree.defined();
  g->spec = in.layout.spec_base.defined();
  g->rows.stage(flat);
  Graph* raw = g.get();
  g->forward = recorder_->record([this, raw]() {
    const std::vector<torch::Tensor>& s = raw->rows.tensors();
    model::AttentionLayout layout;
    size_t i = kLengths + 1;
    if (raw->tree) layout.tree = s[i++];
    if (raw->spec) layout.spec_base = s[i], layout.spec_visible = s[i + 1];
    StaticMode static_mode(cache_, s[kLengths]);
    return drafter_->forward(s[kTokens], s[kFeatures], s[kPositions], cache_, layout);
  });
  Graph& ref = *g;
  graphs_[key] = std::move(g);
  return ref;
}

}  // namespace tlt::rollout
