// The drafter's training data from rollouts: every committed position's token and target hidden
// state per request, filled through the rollout engine's hidden sink (HiddenBuffer), packed as
// tensors (what a rollout worker saves per step), and minibatches of windows drawn from packed
// buffers (what drafter training reads, online on idle workers and in the warm start alike).
//
// Shapes: R requests, T longest sequence (prompt + committed response), C model dim, b windows,
// W window length.
// Thread safety: a HiddenBuffer is used by one thread (the engine's); sample_windows is a function.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "runtime/rollout/engine.h"

namespace tlt::drafter {

class HiddenBuffer {
 public:
  // Registers request `id` with its prompt of `prompt_tokens` tokens: positions before it are not
  // trained (mask 0). Call before the engine generates it.
  void add_request(int64_t id, int64_t prompt_tokens) { seqs_[id].prompt = prompt_tokens; }
  // The engine's sink (rollout::Engine::set_hidden_sink): appends each committed (token, hidden)
  // pair of a request, hidden (n, C) copied as float32. The buffer must outlive the sink's use.
  rollout::HiddenSink sink();
  // tokens (R, T) int64, hidden (R, T, C) float32, mask (R, T) float: 1 on response positions,
  // then the prompt and total lengths (R,) int64; rows in request-id order, zero-padded.
  std::vector<torch::Tensor> tensors() const;
  int64_t positions() const;  // pairs recorded over all requests

 private:
  struct Seq {
    std::vector<int64_t> tokens;
    std::vector<torch::Tensor> hidden;  // chunks of (n, C)
    int64_t prompt = 0;
  };
  std::map<int64_t, Seq> seqs_;
};

// A minibatch of `b` rows drawn uniformly over every row of `buffers` (each a tensors() result
// with at least one row; at least one buffer), from each row a window of at most `window`
// positions that lies in the response (plus the last prompt position, which predicts the first
// response token), so an optimizer step costs the same whatever the sequence lengths. Returns
// tokens (b, W) int64, hidden (b, W, C), mask (b, W), zero-padded past a short row's end.
std::vector<torch::Tensor> sample_windows(const std::vector<std::vector<torch::Tensor>>& buffers,
                                          int64_t b, std::mt19937_64& rng, int64_t window = 64);

}  // namespace tlt::drafter
