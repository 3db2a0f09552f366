// Decoding job objects from YAML (files) and JSON (the apiserver) into api/spec.h types.
//
// Decoding is driven by each struct's field table. It never stops at the first problem: every
// type error and every unknown field is appended to `errors` with its path, and decoding goes
// on with the remaining fields. Unknown fields get the nearest known name as a suggestion.
// Range and cross-field rules are not checked here; see api/validate.h.
//
// Thread safety: stateless functions.
#pragma once

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "api/field.h"
#include "api/spec.h"

namespace tlt::api {

// Decodes `node` (a YAML mapping) into `*out`, overwriting only the fields present; absent
// fields keep their defaults. Problems are appended to `*errors` with paths relative to the
// object root ("spec.algorithm.steps").
void decode(const YAML::Node& node, RLJob* out, FieldErrors* errors);
void decode(const YAML::Node& node, TSTPretrainJob* out, FieldErrors* errors);

// A part of an RLJob spec that a message carries whole (runtime/rl/worker_options.h's setup
// message), as api/encode.h's to_json wrote it: decoded as that part of a manifest is (absent
// fields keep their defaults; wrong types and unknown fields are errors), with paths under `path`
// ("speculative.arms[1]").
void decode(const nlohmann::json& value, const std::string& path, SpeculativeSpec* out,
            FieldErrors* errors);
void decode(const nlohmann::json& value, const std::string& path, DrafterSpec* out,
            FieldErrors* errors);
void decode(const nlohmann::json& value, const std::string& path, AlgorithmSpec* out,
            FieldErrors* errors);

// Conversions between the two trees. yaml_to_json resolves plain scalars the YAML 1.2 core way
// (true/false, null, integers, floats; everything else and all quoted scalars are strings).
// json_to_yaml marks strings as quoted so that they round-trip as strings.
nlohmann::json yaml_to_json(const YAML::Node& node);
YAML::Node json_to_yaml(const nlohmann::json& value);

}  // namespace tlt::api
