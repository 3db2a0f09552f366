// History drafts (the "history" arm, as RhymeRL's HistoSpec and SPEC-RL draft): RL samples many
// responses to one prompt (a GRPO group), and the siblings that finish first, or an earlier
// step's responses to the same prompt, often say what a request still running will write next.
// The history index keeps the finished responses per prompt, indexed by the n-grams (n = 1 to
// kMaxOrder) that precede each of their tokens, and drafts a tree of what followed the longest
// n-gram (at least kMinOrder long) that ends a request's context, weighted by how often each
// continuation occurred. A node's share of the continuations estimates how likely the target is
// to draw it (sampled siblings are draws from the same policy), so nodes below kMinShare are
// not verified. No
// forward pass; the engine verifies the tree by sampling the target at each node (or greedily),
// so the output stays exactly plain decoding's, whatever the history holds.
//
// Memory is bounded: at most `max_responses` responses per prompt (the oldest go first) and at
// most `max_tokens` response tokens over all prompts (the prompt added to least recently goes
// first; a single response longer than the bound is still kept, alone). Each token costs about
// kMaxOrder index entries besides itself: at the defaults (262144 tokens) about 25 MB at most.
//
// Thread safety: none; the engine's one thread owns an index.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "runtime/rollout/speculative.h"

namespace tlt::rollout {

class HistoryIndex {
 public:
  static constexpr int32_t kMaxOrder = 4;     // the longest n-gram matched
  static constexpr int32_t kMinOrder = 2;     // the shortest (one token says too little)
  static constexpr double kMinShare = 0.1;    // of the continuations, for a node to be drafted
  static constexpr int32_t kMaxMatches = 32;  // occurrences (newest first) a draft is built from
  HistoryIndex(int32_t max_responses = 32, int64_t max_tokens = int64_t(1) << 18);
  ~HistoryIndex();
  HistoryIndex(const HistoryIndex&) = delete;
  HistoryIndex& operator=(const HistoryIndex&) = delete;

  // Keeps `response` (the generated tokens, possibly empty) as one of `prompt`'s; may drop older
  // responses to stay within the bounds.
  void add(const std::vector<int64_t>& prompt, const std::vector<int64_t>& response);

  // The draft for a request of `prompt` whose tokens so far are `context` (prompt, generated,
  // the pending token last): a tree rooted at context.back() of at most `max_nodes` nodes (root
  // included) and `depth` levels, whose nodes are the tokens that followed the longest n-gram
  // ending `context` in `prompt`'s responses, the likelier continuations kept first and none
  // taken by fewer than kMinShare of them. Only the root when nothing matches or the prompt has
  // no responses. `context` must not be empty.
  DraftTree draft(const std::vector<int64_t>& prompt, const std::vector<int64_t>& context,
                  int32_t depth, int32_t max_nodes) const;

  int64_t tokens() const { return tokens_; }  // response tokens held
  int64_t prompts() const;                    // prompts with responses held
  int64_t responses(const std::vector<int64_t>& prompt) const;

 private:
  struct Entry;  // one prompt's responses and their n-gram index (draft_history.cc)
  struct VectorHash {
    size_t operator()(const std::vector<int64_t>& v) const;
  };
  using Entries = std::unordered_map<std::vector<int64_t>, std::unique_ptr<Entry>, VectorHash>;

  // Drops whole prompts, least recently added first, until the tokens fit (never `keep`).
  void evict(const Entry* keep);

  const int32_t max_responses_;
  const int64_t max_tokens_;
  Entries entries_;
  std::list<const std::vector<int64_t>*> lru_;  // prompts, least recently added first
  int64_t tokens_ = 0;
};

}  // namespace tlt::rollout
