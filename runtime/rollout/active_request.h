// One request while the rollout engine runs it (runtime/rollout/engine.h), as the engine and the
// draft sources (runtime/rollout/draft_source.h) see it. Internal to runtime/rollout.
//
// Invariant: the target cache holds tokens[0, L) with L = tokens.size() - 1; tokens[L] is the
// pending token (chosen, not yet run through the target). The drafter has been given pairs
// j < drafter_len (pair j = (h_j, t_{j+1})) at position j; its cache holds drafter_cached <=
// drafter_len of them (fewer when a catch-up skipped old pairs under drafter_catch_up_limit).
// `feats` holds the target hidden states of positions [drafter_len, L) not yet given to it.
//
// Thread safety: a value owned by the engine's one thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "runtime/rollout/engine.h"
#include "runtime/rollout/sampling.h"

namespace tlt::rollout {

struct ActiveRequest {
  Request req;
  Rng rng;
  std::vector<int64_t> tokens;  // prompt + generated; back() is pending
  int64_t generated = 0;
  bool done = false, stopped = false;
  std::vector<torch::Tensor> feats;  // (n_i, C) chunks for positions [drafter_len, L)
  int64_t drafter_len = 0;           // next pair's position
  int64_t drafter_cached = 0;        // drafter cache entries (the slot where speculation starts)
  int64_t spec_steps = 0, accepted = 0;
  size_t order = 0;  // index in the caller's request list

  int64_t committed() const { return static_cast<int64_t>(tokens.size()) - 1; }
  int64_t pending() const { return tokens.back(); }
};

}  // namespace tlt::rollout
