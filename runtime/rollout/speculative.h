// Draft trees and the lossless acceptance rules of speculative decoding.
//
// A draft is a tree whose root (node 0) is the token the target already chose for the next
// position; every other node is a drafted guess for the position after its parent. A chain is
// a tree in which each node has at most one child. The target scores all nodes in one forward
// (each node attends to its ancestors), and an acceptance rule walks down from the root:
//   greedy      follow the child equal to the target's argmax; the output is exactly the
//               tokens of plain greedy decoding.
//   by sampling for drafts chosen deterministically (top-k tree, n-gram): draw y from the
//               target's distribution at the node and follow the child equal to y, else stop
//               with y. Every emitted token is a draw from the target's distribution, so the
//               output has exactly the distribution of plain sampling.
//   rejection   for a chain whose tokens were sampled from the drafter's q: accept d with
//               probability min(1, p(d)/q(d)); on rejection draw from norm(max(0, p - q))
//               (Leviathan et al. 2023; Chen et al. 2023). Also exact.
// Each rule ends with one extra token from the target (the correction, or the bonus token after
// the last accepted node), so a step always emits at least one token.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "runtime/rollout/sampling.h"

namespace tlt::rollout {

struct DraftNode {
  int64_t token = 0;
  int32_t parent = -1;  // -1 for the root
  int32_t depth = 0;    // 0 for the root
  double score = 0.0;   // drafter log-probability of the path to this node (root: 0)
};

class DraftTree {
 public:
  explicit DraftTree(int64_t root_token);

  // Adds a node below `parent` and returns its index. Parents precede children.
  int32_t add(int64_t token, int32_t parent, double score);
  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  const DraftNode& node(int32_t i) const { return nodes_[i]; }
  // The child of `node` holding `token`, or -1.
  int32_t child_with_token(int32_t node, int64_t token) const;
  int32_t max_depth() const;
  // mask[i * size() + j] = 1 when j == i or j is an ancestor of i.
  std::vector<uint8_t> ancestor_mask() const;
  // The root plus the best n - 1 other nodes by score with a score of at least min_score,
  // closed under ancestors (a node is only kept with its parent), ordered by depth so parents
  // precede children.
  DraftTree pruned(int32_t n, double min_score = -std::numeric_limits<double>::infinity()) const;

 private:
  std::vector<DraftNode> nodes_;
  std::vector<std::vector<int32_t>> children_;
};

// The outcome of verifying one request's draft.
struct Verdict {
  std::vector<int32_t> path;  // accepted node indices, starting with the root (0)
  int64_t next_token = 0;     // the target's own token after the last accepted node
  int64_t accepted() const { return static_cast<int64_t>(path.size()) - 1; }  // drafted tokens
};

// Target logits of all draft nodes: row i (V values) scores the token after node i.
struct NodeLogits {
  const float* data;  // (N, V) row-major
  int64_t vocab;
  const float* row(int32_t i) const { return data + static_cast<int64_t>(i) * vocab; }
};

Verdict accept_greedy(const DraftTree& tree, const NodeLogits& logits);
Verdict accept_by_sampling(const DraftTree& tree, const NodeLogits& logits,
                           const SamplingParams& params, Rng& rng);
// q[k] is the drafter distribution the chain's node k+1 was sampled from (V probabilities).
Verdict accept_rejection_chain(const DraftTree& chain, const NodeLogits& logits,
                               const std::vector<std::vector<double>>& q,
                               const SamplingParams& params, Rng& rng);

// The signature of the rule for deterministic drafts, so tests can swap in a wrong one.
using TreeRule =
    std::function<Verdict(const DraftTree&, const NodeLogits&, const SamplingParams&, Rng&)>;

// The signature of a chain rule, so tests can swap in a deliberately wrong one.
using ChainRule =
    std::function<Verdict(const DraftTree&, const NodeLogits&,
                          const std::vector<std::vector<double>>&, const SamplingParams&, Rng&)>;

}  // namespace tlt::rollout
