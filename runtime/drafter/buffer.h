// The drafter's training data from rollouts: every committed position's token and target hidden
// state per request, filled through the rollout engine's hidden sink (HiddenBuffer), packed as
// tensors (what a rollout worker saves per step), and minibatches of windows drawn from packed
// buffers (what drafter training reads, online on idle workers and in the warm start alike).
//
// Shapes: R requests, N positions kept over all requests, F feature width (the target's drafter
// features: C, or 3C when it exports fused features, model::ForwardResult::drafter_features),
// b windows, W window length (at most kWindow).
// Thread safety: a HiddenBuffer is used by one thread (the engine's); the rest are functions.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "runtime/rollout/engine.h"

namespace tlt::drafter {

// The longest window the drafter trains on (sample_windows), and so the most prompt positions a
// buffer keeps before each response.
constexpr int64_t kWindow = 64;

class HiddenBuffer {
 public:
  // Registers request `id` with its prompt of `prompt_tokens` tokens: positions before it are not
  // trained (mask 0). Call before the engine generates it.
  void add_request(int64_t id, int64_t prompt_tokens) { seqs_[id].prompt = prompt_tokens; }
  // The engine's sink (rollout::Engine::set_hidden_sink): appends each committed (token, feature)
  // pair of a request, the feature (F) as the engine hands it. The hidden states are the engine's own tensors, kept without a copy
  // (engine.h). The buffer must outlive the sink's use.
  rollout::HiddenSink sink();
  // What the windows can reach, packed: of each request (in request-id order) the positions from
  // kWindow before its response on, rows back to back, on the CPU (a buffer is written to a file
  // whatever the engine's device). tokens (N,) int64, hidden (N, F) float32,
  // offsets (R+1,) int64 (row r is [offsets[r], offsets[r+1])), and each row's prompt positions
  // (R,) int64. Packing keeps a long-tailed step at the positions it has: padding every row to
  // the longest cost a rollout worker 20 MB and ~40 ms a step (64 requests, one of 600 tokens).
  std::vector<torch::Tensor> tensors() const;
  int64_t positions() const;  // pairs recorded over all requests

 private:
  struct Seq {
    std::vector<int64_t> tokens;
    std::vector<torch::Tensor> hidden;  // chunks of (n, F)
    int64_t prompt = 0;
  };
  std::map<int64_t, Seq> seqs_;
};

// Whether `d` has the layout of HiddenBuffer::tensors() with at least one row.
bool is_packed_buffer(const std::vector<torch::Tensor>& d);

// A minibatch of `b` rows drawn uniformly over every row of `buffers` (each a tensors() result
// with at least one row; at least one buffer), from each row a window of at most `window` (<=
// kWindow) positions that lies in the response (plus the last prompt position, which predicts
// the first response token), so an optimizer step costs the same whatever the sequence lengths.
// Returns tokens (b, W) int64, hidden (b, W, F), mask (b, W), zero-padded past a short row's end.
std::vector<torch::Tensor> sample_windows(const std::vector<std::vector<torch::Tensor>>& buffers,
                                          int64_t b, std::mt19937_64& rng,
                                          int64_t window = kWindow);

}  // namespace tlt::drafter
