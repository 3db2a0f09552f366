#include "runtime/rollout/draft_source.h"

namespace tlt::rollout {

namespace {

using Factory = std::unique_ptr<DraftSource> (*)(const api::Arm&, DrafterContext*,
                                                 const DraftSettings&);

struct Registered {
  bool (*serves)(const api::Arm&);
  Factory make;
};

// The registry: the first entry that serves an arm makes its source.
const Registered kSources[] = {
    {[](const api::Arm& a) { return a.history; }, make_history_source},
    {[](const api::Arm& a) { return a.ngram; }, make_ngram_source},
    {[](const api::Arm& a) { return !a.ngram && a.top_k == 1; }, make_eagle_chain_source},
    {[](const api::Arm& a) { return !a.ngram && a.top_k > 1; }, make_eagle_tree_source},
};

}  // namespace

std::unique_ptr<DraftSource> make_draft_source(const api::Arm& arm, DrafterContext* drafter,
                                               const DraftSettings& settings) {
  for (const Registered& r : kSources)
    if (r.serves(arm)) return r.make(arm, drafter, settings);
  return nullptr;  // api::parse_arm makes no other arm
}

}  // namespace tlt::rollout
