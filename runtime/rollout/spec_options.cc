#include "runtime/rollout/spec_options.h"

namespace tlt::rollout {

EngineOptions engine_options(const api::SpeculativeSpec& s) {
  EngineOptions eo;
  eo.speculative = s.enabled;
  eo.activation_threshold = s.activation_threshold;
  eo.arms = s.arms;
  eo.ngram_shortcut = s.ngram_shortcut;
  eo.draft_confidence = s.draft_confidence;
  eo.drafter_catch_up_limit = s.drafter_catch_up_limit;
  eo.selector = s.selector.type;
  eo.buckets = s.selector.buckets;
  eo.epsilon = s.selector.epsilon;
  eo.window = s.selector.window;
  eo.selector_value = s.selector.value;
  eo.selector_exploration = s.selector.exploration;
  return eo;
}

}  // namespace tlt::rollout
