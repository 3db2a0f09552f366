#include "runtime/rollout/speculative.h"

#include <algorithm>
#include <numeric>

namespace tlt::rollout {

DraftTree::DraftTree(int64_t root_token) {
  nodes_.push_back({root_token, -1, 0, 0.0});
  children_.emplace_back();
}

int32_t DraftTree::add(int64_t token, int32_t parent, double score) {
  int32_t id = size();
  nodes_.push_back({token, parent, nodes_[parent].depth + 1, score});
  children_.emplace_back();
  children_[parent].push_back(id);
  return id;
}

int32_t DraftTree::child_with_token(int32_t node, int64_t token) const {
  for (int32_t c : children_[node]) {
    if (nodes_[c].token == token) return c;
  }
  return -1;
}

int32_t DraftTree::max_depth() const {
  int32_t d = 0;
  for (const DraftNode& n : nodes_) d = std::max(d, n.depth);
  return d;
}

std::vector<uint8_t> DraftTree::ancestor_mask() const {
  int32_t n = size();
  std::vector<uint8_t> mask(static_cast<size_t>(n) * n, 0);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t a = i; a >= 0; a = nodes_[a].parent) mask[static_cast<size_t>(i) * n + a] = 1;
  }
  return mask;
}

DraftTree DraftTree::pruned(int32_t n, double min_score) const {
  std::vector<int32_t> order(size() - 1);
  std::iota(order.begin(), order.end(), 1);
  // Higher score first; on ties the shallower (then earlier) node, so parents come first.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (nodes_[a].score != nodes_[b].score) return nodes_[a].score > nodes_[b].score;
    return nodes_[a].depth < nodes_[b].depth;
  });
  std::vector<char> keep(size(), 0);
  keep[0] = 1;
  int32_t kept = 1;
  for (int32_t i : order) {
    if (kept >= n || nodes_[i].score < min_score) break;  // sorted: the rest score lower
    if (!keep[nodes_[i].parent]) continue;                // a child never outranks a missing parent
    keep[i] = 1;
    ++kept;
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < size(); ++i) {
    if (keep[i]) ids.push_back(i);
  }
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return nodes_[a].depth < nodes_[b].depth; });
  std::vector<int32_t> renumber(size(), -1);
  DraftTree out(nodes_[0].token);
  renumber[0] = 0;
  for (int32_t i : ids) {
    if (i == 0) continue;
    renumber[i] = out.add(nodes_[i].token, renumber[nodes_[i].parent], nodes_[i].score);
  }
  return out;
}

namespace {

// From the root, let the target choose its token at each node (`choose(row)`) and follow the
// child holding it; stop with the target's token where no child does.
template <class Choose>
Verdict follow_target(const DraftTree& tree, const NodeLogits& logits, Choose choose) {
  Verdict v;
  int32_t at = 0;
  v.path.push_back(0);
  for (;;) {
    int64_t y = choose(logits.row(at));
    int32_t next = tree.child_with_token(at, y);
    if (next < 0) {
      v.next_token = y;
      return v;
    }
    v.path.push_back(next);
    at = next;
  }
}

}  // namespace

Verdict accept_greedy(const DraftTree& tree, const NodeLogits& logits) {
  return follow_target(tree, logits, [&](const float* row) { return argmax(row, logits.vocab); });
}

Verdict accept_by_sampling(const DraftTree& tree, const NodeLogits& logits,
                           const SamplingParams& params, Rng& rng) {
  return follow_target(tree, logits, [&](const float* row) {
    return sample(sampling_probs(row, logits.vocab, params), rng);
  });
}

Verdict accept_rejection_chain(const DraftTree& chain, const NodeLogits& logits,
                               const std::vector<std::vector<double>>& q,
                               const SamplingParams& params, Rng& rng) {
  Verdict v;
  v.path.push_back(0);
  int32_t at = 0;
  for (int32_t k = 1; k < chain.size(); ++k) {
    std::vector<double> p = sampling_probs(logits.row(at), logits.vocab, params);
    int64_t d = chain.node(k).token;
    const std::vector<double>& qk = q[k - 1];
    double ratio = qk[d] > 0.0 ? p[d] / qk[d] : 0.0;
    if (rng.uniform() < std::min(1.0, ratio)) {
      v.path.push_back(k);
      at = k;
      continue;
    }
    std::vector<double> residual(p.size());
    double mass = 0.0;
    for (size_t i = 0; i < p.size(); ++i) mass += residual[i] = std::max(0.0, p[i] - qk[i]);
    if (mass <= 0.0) {
      residual = p;  // p == q: nothing to correct (cannot be reached when d was rejected)
    } else {
      for (double& r : residual) r /= mass;
    }
    v.next_token = sample(residual, rng);
    return v;
  }
  v.next_token = sample(sampling_probs(logits.row(at), logits.vocab, params), rng);
  return v;
}

}  // namespace tlt::rollout
