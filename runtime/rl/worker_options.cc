#include "runtime/rl/worker_options.h"

#include <type_traits>

#include "api/decode.h"
#include "api/encode.h"

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

// Reads spec[key], a part of the job spec, through its field table (errors name "spec.<key>...").
template <class Part>
Status read_part(const json& spec, const char* key, Part* out) {
  const std::string path = std::string("spec.") + key;
  auto it = spec.find(key);
  std::string field = "setup message: field \"" + path + "\"";
  if (it == spec.end()) return Status::InvalidArgument(field + " is missing");
  if (!it->is_object())
    return Status::InvalidArgument(field + " has the wrong type: " + it->dump().substr(0, 80));
  api::FieldErrors errors;
  api::decode(*it, path, out, &errors);
  if (errors.empty()) return Status::Ok();
  return Status::InvalidArgument("setup message: " + errors.front().to_string());
}

}  // namespace

json to_json(const WorkerOptions& o) {
  return {{"op", "setup"},
          {"index", o.index},
          {"dir", o.dir},
          {"core", o.core},
          {"device", o.device},
          {"preset", o.preset},
          {"vocab", o.vocab},
          {"model_card", o.model_card},
          {"max_seq", o.max_seq},
          {"max_batch", o.max_batch},
          {"seed", o.seed},
          {"decode_bfloat16", o.decode_bfloat16},
          {"drafter_bfloat16", o.drafter_bfloat16},
          {"drafter_vocab_ids", o.drafter_vocab_ids},
          {"spec",
           {{"speculative", api::to_json(o.speculative)}, {"drafter", api::to_json(o.drafter)}}}};
}

StatusOr<WorkerOptions> worker_options_from_json(const json& m) {
  if (!m.is_object()) return Status::InvalidArgument("setup message: not a JSON object");
  WorkerOptions o;
  TLT_RETURN_IF_ERROR(read(m, "index", &o.index));
  TLT_RETURN_IF_ERROR(read(m, "dir", &o.dir));
  TLT_RETURN_IF_ERROR(read(m, "core", &o.core));
  TLT_RETURN_IF_ERROR(read(m, "device", &o.device));
  TLT_RETURN_IF_ERROR(read(m, "preset", &o.preset));
  TLT_RETURN_IF_ERROR(read(m, "vocab", &o.vocab));
  TLT_RETURN_IF_ERROR(read(m, "model_card", &o.model_card));
  TLT_RETURN_IF_ERROR(read(m, "max_seq", &o.max_seq));
  TLT_RETURN_IF_ERROR(read(m, "max_batch", &o.max_batch));
  TLT_RETURN_IF_ERROR(read(m, "seed", &o.seed));
  TLT_RETURN_IF_ERROR(read(m, "decode_bfloat16", &o.decode_bfloat16));
  TLT_RETURN_IF_ERROR(read(m, "drafter_bfloat16", &o.drafter_bfloat16));
  TLT_RETURN_IF_ERROR(read(m, "drafter_vocab_ids", &o.drafter_vocab_ids));
  auto spec = m.find("spec");
  if (spec == m.end() || !spec->is_object())
    return Status::InvalidArgument("setup message: field \"spec\" is missing or not an object");
  TLT_RETURN_IF_ERROR(read_part(*spec, "speculative", &o.speculative));
  TLT_RETURN_IF_ERROR(read_part(*spec, "drafter", &o.drafter));
  return o;
}

}  // namespace tlt::rl
