// Encoding job objects to JSON (for the apiserver, ConfigMaps and reports) and writing the
// configuration reference, both from the field tables of api/spec.h.
//
// Thread safety: stateless functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/spec.h"

namespace tlt::api {

// The whole object, defaults included, in the camelCase JSON users write. Optional fields
// that are unset and empty apiserver bookkeeping are left out. decode(to_json(x)) == x.
nlohmann::json to_json(const RLJob& job);
nlohmann::json to_json(const TSTPretrainJob& job);
nlohmann::json to_json(const RLJobSpec& spec);
nlohmann::json to_json(const TSTPretrainJobSpec& spec);
nlohmann::json to_json(const RLJobStatus& status);
nlohmann::json to_json(const TSTPretrainJobStatus& status);
// Parts of an RLJob spec that a message carries whole (runtime/rl/worker_options.h's setup
// message): decode (api/decode.h) reads them back.
nlohmann::json to_json(const SpeculativeSpec& spec);
nlohmann::json to_json(const DrafterSpec& spec);
nlohmann::json to_json(const AlgorithmSpec& spec);

// A Markdown table of every spec field of `kind` ("RLJob" or "TSTPretrainJob"): path, default,
// allowed values and documentation. Returns "" for an unknown kind.
std::string reference_markdown(const std::string& kind);

}  // namespace tlt::api
