// The "history" arm: the history index (draft_history.h) and the draft source that serves the
// arm from it. No model, no forward pass.
#include "runtime/rollout/draft_history.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "runtime/rollout/draft_source.h"

namespace tlt::rollout {

namespace {

// Where a continuation starts: response `seq` (an id), its token `pos` follows the n-gram.
struct Occurrence {
  int64_t seq;
  int32_t pos;
};

uint64_t mix(uint64_t h) {  // splitmix64's finalizer
  h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27, h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// The n tokens at `t`, and n itself (an n-gram and its suffixes must not share a key).
uint64_t gram_key(const int64_t* t, int32_t n) {
  uint64_t h = mix(uint64_t(n));
  for (int32_t i = 0; i < n; ++i) h = mix(h ^ uint64_t(t[i]));
  return h;
}

}  // namespace

// One prompt's responses, each stored behind the prompt's last kMaxOrder tokens so that the
// n-grams that end in the prompt (a response's first tokens) match too.
struct HistoryIndex::Entry {
  std::deque<std::vector<int64_t>> seqs;  // prompt tail + response, oldest first
  std::deque<int64_t> gram_counts;        // index entries of each of seqs
  std::deque<int64_t> response_tokens;    // response length of each of seqs
  int64_t first_id = 0;                   // the id of seqs.front(); ids only grow
  std::unordered_map<uint64_t, std::vector<Occurrence>> grams;  // gram_key -> occurrences
  int64_t live = 0, stale = 0;  // index entries of held and of dropped responses
  std::list<const std::vector<int64_t>*>::iterator lru;

  // Indexes seqs[id - first_id]: every response token under each n-gram before it.
  int64_t index(int64_t id, int32_t start) {
    const std::vector<int64_t>& s = seqs[size_t(id - first_id)];
    int64_t added = 0;
    for (int32_t p = start; p < int32_t(s.size()); ++p)
      for (int32_t n = 1; n <= std::min(kMaxOrder, p); ++n, ++added)
        grams[gram_key(&s[size_t(p - n)], n)].push_back({id, p});
    return added;
  }
  // Drops the oldest response; its index entries go stale until the next compact().
  int64_t drop_oldest() {
    int64_t freed = response_tokens.front();
    stale += gram_counts.front(), live -= gram_counts.front();
    seqs.pop_front(), gram_counts.pop_front(), response_tokens.pop_front();
    ++first_id;
    return freed;
  }
  // Rebuilds the index once stale entries outnumber live ones (amortized O(1) per token).
  void compact() {
    if (stale <= live) return;
    grams.clear();
    stale = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      int32_t start = int32_t(seqs[i].size() - size_t(response_tokens[i]));
      index(first_id + int64_t(i), start);
    }
  }
};

size_t HistoryIndex::VectorHash::operator()(const std::vector<int64_t>& v) const {
  return size_t(gram_key(v.data(), int32_t(v.size())));
}

HistoryIndex::HistoryIndex(int32_t max_responses, int64_t max_tokens)
    : max_responses_(std::max(1, max_responses)), max_tokens_(std::max<int64_t>(1, max_tokens)) {}

HistoryIndex::~HistoryIndex() = default;

void HistoryIndex::add(const std::vector<int64_t>& prompt, const std::vector<int64_t>& response) {
  auto it = entries_.find(prompt);
  if (it == entries_.end()) {
    it = entries_.emplace(prompt, std::make_unique<Entry>()).first;
    lru_.push_back(&it->first);
    it->second->lru = std::prev(lru_.end());
  } else {
    lru_.splice(lru_.end(), lru_, it->second->lru);
  }
  Entry& e = *it->second;
  size_t tail = std::min(prompt.size(), size_t(kMaxOrder));
  std::vector<int64_t> seq(prompt.end() - long(tail), prompt.end());
  seq.insert(seq.end(), response.begin(), response.end());
  e.seqs.push_back(std::move(seq));
  e.response_tokens.push_back(int64_t(response.size()));
  int64_t added = e.index(e.first_id + int64_t(e.seqs.size()) - 1, int32_t(tail));
  e.gram_counts.push_back(added);
  e.live += added;
  tokens_ += int64_t(response.size());
  while (int64_t(e.seqs.size()) > max_responses_) tokens_ -= e.drop_oldest();
  evict(&e);
  while (tokens_ > max_tokens_ && e.seqs.size() > 1) tokens_ -= e.drop_oldest();
  e.compact();
}

void HistoryIndex::evict(const Entry* keep) {
  while (tokens_ > max_tokens_ && !lru_.empty()) {
    auto it = entries_.find(*lru_.front());
    if (it->second.get() == keep) return;  // the least recent is the one being added to
    for (int64_t n : it->second->response_tokens) tokens_ -= n;
    lru_.pop_front();
    entries_.erase(it);
  }
}

int64_t HistoryIndex::prompts() const {
  return int64_t(entries_.size());
}

int64_t HistoryIndex::responses(const std::vector<int64_t>& prompt) const {
  auto it = entries_.find(prompt);
  return it == entries_.end() ? 0 : int64_t(it->second->seqs.size());
}

DraftTree HistoryIndex::draft(const std::vector<int64_t>& prompt,
                              const std::vector<int64_t>& context, int32_t depth,
                              int32_t max_nodes) const {
  auto it = entries_.find(prompt);
  if (it == entries_.end() || max_nodes < 2 || depth < 1) return DraftTree(context.back());
  const Entry& e = *it->second;
  // The occurrences of the longest n-gram that ends the context, newest first.
  std::vector<Occurrence> found;
  int32_t len = int32_t(context.size());
  for (int32_t n = std::min(kMaxOrder, len); n >= kMinOrder && found.empty(); --n) {
    const int64_t* tail = context.data() + (len - n);
    auto g = e.grams.find(gram_key(tail, n));
    if (g == e.grams.end()) continue;
    for (auto o = g->second.rbegin(); o != g->second.rend(); ++o) {
      if (o->seq < e.first_id) break;  // older ones were dropped too
      const std::vector<int64_t>& s = e.seqs[size_t(o->seq - e.first_id)];
      if (!std::equal(tail, tail + n, s.begin() + (o->pos - n))) continue;  // a hash collision
      found.push_back(*o);
      if (int32_t(found.size()) == kMaxMatches) break;
    }
  }
  // A trie of the continuations, `depth` tokens each; a node's count is the continuations
  // through it.
  std::vector<int64_t> token{context.back()};
  std::vector<int32_t> parent{-1}, count{int32_t(found.size())};
  std::vector<std::vector<int32_t>> children(1);
  for (const Occurrence& o : found) {
    const std::vector<int64_t>& s = e.seqs[size_t(o.seq - e.first_id)];
    int32_t at = 0;
    for (int32_t k = 0; k < depth && o.pos + k < int32_t(s.size()); ++k) {
      int64_t t = s[size_t(o.pos + k)];
      auto c = std::find_if(children[size_t(at)].begin(), children[size_t(at)].end(),
                            [&](int32_t i) { return token[size_t(i)] == t; });
      int32_t next = c != children[size_t(at)].end() ? *c : int32_t(token.size());
      if (next == int32_t(token.size())) {
        token.push_back(t), parent.push_back(at), count.push_back(0), children.emplace_back();
        children[size_t(at)].push_back(next);
      }
      ++count[size_t(next)];
      at = next;
    }
  }
  // Scored by the share of continuations through the node; pruned keeps the likeliest.
  DraftTree full(context.back());
  for (size_t i = 1; i < token.size(); ++i)
    full.add(token[i], parent[i], std::log(double(count[i]) / double(found.size())));
  return full.pruned(max_nodes, std::log(kMinShare));
}

namespace {

class HistorySource : public DraftSource {
 public:
  explicit HistorySource(const api::Arm& arm) : depth_(arm.depth), nodes_(arm.verify_tokens) {}

  bool needs_drafter() const override { return false; }
  int64_t headroom() const override { return nodes_ + 1; }

  std::vector<Draft> propose(std::vector<ActiveRequest>& batch) override {
    std::vector<Draft> drafts;
    drafts.reserve(batch.size());
    for (const ActiveRequest& a : batch)
      drafts.push_back(Draft{index_.draft(a.req.prompt, a.tokens, depth_, nodes_), false, {}});
    return drafts;
  }

  void observe_finished(const std::vector<int64_t>& prompt,
                        const std::vector<int64_t>& response) override {
    index_.add(prompt, response);
  }

 private:
  int32_t depth_, nodes_;
  HistoryIndex index_;
};

}  // namespace

std::unique_ptr<DraftSource> make_history_source(const api::Arm& arm, DrafterContext*,
                                                 const DraftSettings&) {
  return std::make_unique<HistorySource>(arm);
}

}  // namespace tlt::rollout
