// Draft sources: where a speculative step's drafts come from. Each arm of the rollout engine
// (runtime/rollout/engine.h) is served by one source, which proposes one DraftTree per request
// of the batch, rooted at the request's pending token; the engine then verifies every draft in
// one target forward and commits what the acceptance rule keeps (speculative.h). A source only
// proposes: it never touches the target or its cache, so whatever it proposes the output stays
// lossless.
//
// The sources, one file each:
//   draft_ngram.cc        model-free: the tokens that followed the context's last n-gram before
//   draft_eagle_chain.cc  the EAGLE drafter's chain (top-1, or sampled and verified by rejection)
//   draft_eagle_tree.cc   the EAGLE drafter's top-k tree, pruned to the arm's verified tokens
//   draft_history.cc      model-free: a tree of what followed the request's context in responses
//                         already finished for the same prompt (GRPO siblings, earlier calls)
//   copied_drafts.cc      not an arm: drafts copied from a request's own context that stand in
//                         for a drafter source's when its context repeats (ngramShortcut)
// A source may need no model at all (n-gram), or the target's hidden states through the drafter
// (EAGLE: DrafterContext, drafter_context.h). Adding an arm: one file defining its factory, and
// one line in the registry in draft_source.cc (plus its name in api/arm.h).
//
// Thread safety: the engine's one thread calls a source.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "api/arm.h"
#include "runtime/rollout/active_request.h"
#include "runtime/rollout/speculative.h"

namespace tlt::rollout {

class DrafterContext;

// One request's draft.
struct Draft {
  DraftTree tree{0};  // node 0 is the request's pending token
  // A chain sampled from the drafter, verified by rejection (the engine's ChainRule): q[k] is
  // the drafter distribution node k+1 was drawn from (V probabilities). Otherwise the nodes were
  // chosen deterministically and are verified by sampling the target at each node.
  bool sampled = false;
  std::vector<std::vector<double>> q;
};

// What the engine's options say about drafting (EngineOptions has each field's story).
struct DraftSettings {
  bool reproducible = false;      // sampled requests draft deterministically too
  bool coupled_drafts = true;     // reproducible chains and sampled trees draft at race keys
  double coupling_noise = 1.0;    // coupled trees' model of the target's distance to the drafter
  double draft_confidence = 0.0;  // drop drafted nodes whose path is less likely than this
};

class DraftSource {
 public:
  virtual ~DraftSource() = default;

  // True when the source runs the drafter model: an engine without one leaves the arm out, and
  // copied drafts may stand in for its drafts.
  virtual bool needs_drafter() const = 0;
  // Cache entries past a request's committed tokens one step of this source may write, in the
  // target's and the drafter's cache together (what a request must leave free under max_seq).
  virtual int64_t headroom() const = 0;
  // One draft per request of `batch`, in its order. May advance a request's drafter state
  // (drafter_len, drafter_cached, feats) and, for chains sampled from the drafter, its RNG;
  // never its tokens. Exceptions from LibTorch propagate (the engine catches them).
  virtual std::vector<Draft> propose(std::vector<ActiveRequest>& batch) = 0;
  // A request of the engine finished with `response` (its generated tokens) to `prompt`. A source
  // that drafts from finished responses keeps it (within its own memory bound); the others
  // ignore it.
  virtual void observe_finished(const std::vector<int64_t>& prompt,
                                const std::vector<int64_t>& response) {
    (void)prompt, (void)response;
  }
};

// The source serving `arm`. `drafter` (borrowed, may be null when the engine has no drafter)
// outlives the source; a source that needs_drafter() must not propose without one.
std::unique_ptr<DraftSource> make_draft_source(const api::Arm& arm, DrafterContext* drafter,
                                               const DraftSettings& settings);

// The factories the registry lists, one per file.
std::unique_ptr<DraftSource> make_ngram_source(const api::Arm& arm, DrafterContext* drafter,
                                               const DraftSettings& settings);
std::unique_ptr<DraftSource> make_eagle_chain_source(const api::Arm& arm, DrafterContext* drafter,
                                                     const DraftSettings& settings);
std::unique_ptr<DraftSource> make_eagle_tree_source(const api::Arm& arm, DrafterContext* drafter,
                                                    const DraftSettings& settings);
std::unique_ptr<DraftSource> make_history_source(const api::Arm& arm, DrafterContext* drafter,
                                                 const DraftSettings& settings);

}  // namespace tlt::rollout
