#include "runtime/rl/worker_options.h"

#include <type_traits>

namespace tlt::rl {
namespace {

using nlohmann::json;

// Whether `v` holds a value of T's JSON type (containers are checked by the conversion).
template <class T>
bool has_type(const json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean();
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    return v.is_number_unsigned();
  } else if constexpr (std::is_integral_v<T>) {
    return v.is_number_integer();
  } else if constexpr (std::is_floating_point_v<T>) {
    return v.is_number();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string();
  } else {
    return v.is_array();
  }
}

// Reads m[key] into *out; InvalidArgument naming the field when it is absent or mistyped.
template <class T>
Status read(const json& m, const char* key, T* out) {
  std::string field = std::string("setup message: field \"") + key + "\"";
  auto it = m.find(key);
  if (it == m.end()) return Status::InvalidArgument(field + " is missing");
  if (!has_type<T>(*it))
    return Status::InvalidArgument(field + " has the wrong type: " + it->dump().substr(0, 80));
  try {
    it->get_to(*out);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(field + ": " + e.what());
  }
  return Status::Ok();
}

}  // namespace

WorkerSpec worker_spec_from(const api::RLJobSpec& s) {
  WorkerSpec w;
  const api::SpeculativeSpec& sp = s.speculative;
  w.activation_threshold = sp.activation_threshold;
  w.arms = sp.arms;
  w.ngram_shortcut = sp.ngram_shortcut;
  w.draft_confidence = sp.draft_confidence;
  w.drafter_catch_up_limit = sp.drafter_catch_up_limit;
  w.selector = sp.selector.type, w.epsilon = sp.selector.epsilon;
  w.buckets = sp.selector.buckets, w.window = sp.selector.window;
  w.selector_value = sp.selector.value;
  w.selector_exploration = sp.selector.exploration;
  w.drafter_layers = s.drafter.layers;
  w.drafter_train_levels = s.drafter.train_levels;
  w.drafter_fused = s.drafter.features == "fused";
  w.drafter_vocab_subset = s.drafter.vocab_subset;
  w.drafter_learning_rate = s.drafter.training.learning_rate;
  w.drafter_batch = s.drafter.training.batch_size;
  return w;
}

json to_json(const WorkerOptions& o) {
  const WorkerSpec& w = o.spec;
  return {{"op", "setup"},
          {"index", o.index},
          {"dir", o.dir},
          {"core", o.core},
          {"preset", o.preset},
          {"vocab", o.vocab},
          {"model_card", o.model_card},
          {"max_seq", o.max_seq},
          {"max_batch", o.max_batch},
          {"seed", o.seed},
          {"decode_bfloat16", o.decode_bfloat16},
          {"drafter_bfloat16", o.drafter_bfloat16},
          {"drafter_vocab_ids", o.drafter_vocab_ids},
          {"activation_threshold", w.activation_threshold},
          {"arms", w.arms},
          {"ngram_shortcut", w.ngram_shortcut},
          {"draft_confidence", w.draft_confidence},
          {"drafter_catch_up_limit", w.drafter_catch_up_limit},
          {"selector", w.selector},
          {"buckets", w.buckets},
          {"epsilon", w.epsilon},
          {"window", w.window},
          {"selector_value", w.selector_value},
          {"selector_exploration", w.selector_exploration},
          {"drafter_layers", w.drafter_layers},
          {"drafter_levels", w.drafter_train_levels},
          {"drafter_fused", w.drafter_fused},
          {"drafter_vocab", w.drafter_vocab_subset},
          {"drafter_lr", w.drafter_learning_rate},
          {"drafter_batch", w.drafter_batch}};
}

StatusOr<WorkerOptions> worker_options_from_json(const json& m) {
  if (!m.is_object()) return Status::InvalidArgument("setup message: not a JSON object");
  WorkerOptions o;
  WorkerSpec& w = o.spec;
  TLT_RETURN_IF_ERROR(read(m, "index", &o.index));
  TLT_RETURN_IF_ERROR(read(m, "dir", &o.dir));
  TLT_RETURN_IF_ERROR(read(m, "core", &o.core));
  TLT_RETURN_IF_ERROR(read(m, "preset", &o.preset));
  TLT_RETURN_IF_ERROR(read(m, "vocab", &o.vocab));
  TLT_RETURN_IF_ERROR(read(m, "model_card", &o.model_card));
  TLT_RETURN_IF_ERROR(read(m, "max_seq", &o.max_seq));
  TLT_RETURN_IF_ERROR(read(m, "max_batch", &o.max_batch));
  TLT_RETURN_IF_ERROR(read(m, "seed", &o.seed));
  TLT_RETURN_IF_ERROR(read(m, "decode_bfloat16", &o.decode_bfloat16));
  TLT_RETURN_IF_ERROR(read(m, "drafter_bfloat16", &o.drafter_bfloat16));
  TLT_RETURN_IF_ERROR(read(m, "drafter_vocab_ids", &o.drafter_vocab_ids));
  TLT_RETURN_IF_ERROR(read(m, "activation_threshold", &w.activation_threshold));
  TLT_RETURN_IF_ERROR(read(m, "arms", &w.arms));
  TLT_RETURN_IF_ERROR(read(m, "ngram_shortcut", &w.ngram_shortcut));
  TLT_RETURN_IF_ERROR(read(m, "draft_confidence", &w.draft_confidence));
  TLT_RETURN_IF_ERROR(read(m, "drafter_catch_up_limit", &w.drafter_catch_up_limit));
  TLT_RETURN_IF_ERROR(read(m, "selector", &w.selector));
  TLT_RETURN_IF_ERROR(read(m, "buckets", &w.buckets));
  TLT_RETURN_IF_ERROR(read(m, "epsilon", &w.epsilon));
  TLT_RETURN_IF_ERROR(read(m, "window", &w.window));
  TLT_RETURN_IF_ERROR(read(m, "selector_value", &w.selector_value));
  TLT_RETURN_IF_ERROR(read(m, "selector_exploration", &w.selector_exploration));
  TLT_RETURN_IF_ERROR(read(m, "drafter_layers", &w.drafter_layers));
  TLT_RETURN_IF_ERROR(read(m, "drafter_levels", &w.drafter_train_levels));
  TLT_RETURN_IF_ERROR(read(m, "drafter_fused", &w.drafter_fused));
  TLT_RETURN_IF_ERROR(read(m, "drafter_vocab", &w.drafter_vocab_subset));
  TLT_RETURN_IF_ERROR(read(m, "drafter_lr", &w.drafter_learning_rate));
  TLT_RETURN_IF_ERROR(read(m, "drafter_batch", &w.drafter_batch));
  return o;
}

}  // namespace tlt::rl
