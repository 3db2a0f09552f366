// The n-gram arms ("ngram", "ngram_D"): each request's draft is the chain of tokens that followed
// the most recent earlier occurrence of its context's last n-gram (runtime/rollout/ngram.h).
// No model, no forward pass.
#include "runtime/rollout/draft_source.h"
#include "runtime/rollout/ngram.h"

namespace tlt::rollout {

namespace {

class NgramSource : public DraftSource {
 public:
  explicit NgramSource(const api::Arm& arm) : depth_(arm.depth) {}

  bool needs_drafter() const override { return false; }
  int64_t headroom() const override { return depth_ + 2; }

  std::vector<Draft> propose(std::vector<ActiveRequest>& batch) override {
    std::vector<Draft> drafts;
    for (const ActiveRequest& a : batch) {
      Draft d{DraftTree(a.pending()), false, {}};
      int32_t at = 0;
      for (int64_t tok : ngram_propose(a.tokens, depth_)) at = d.tree.add(tok, at, 0.0);
      drafts.push_back(std::move(d));
    }
    return drafts;
  }

 private:
  int32_t depth_;
};

}  // namespace

std::unique_ptr<DraftSource> make_ngram_source(const api::Arm& arm, DrafterContext*,
                                               const DraftSettings&) {
  return std::make_unique<NgramSource>(arm);
}

}  // namespace tlt::rollout
