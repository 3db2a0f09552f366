// Reading job manifests: YAML files (possibly several documents) and apiserver JSON, to a
// decoded and validated Job.
//
// This is the entry point the runtime (`tlt run`, `tlt validate`) and the operator use; the
// decode/validate pieces behind it are in api/decode.h and api/validate.h.
//
// Thread safety: stateless functions.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/field.h"
#include "api/spec.h"
#include "api/status.h"

namespace tlt::api {

using Job = std::variant<RLJob, TSTPretrainJob>;

// One YAML document of a manifest file.
struct Document {
  int index = 0;           // 0-based position in the file
  std::optional<Job> job;  // set when the kind was recognised (even if errors follow)
  FieldErrors errors;      // syntax, type, unknown-field, range and cross-field problems
  bool ok() const { return job.has_value() && errors.empty(); }
};

// Decodes and validates every document of `yaml_text`. Empty documents are skipped. A YAML
// syntax error yields one Document whose error names the line and column. Never throws.
std::vector<Document> parse_manifests(const std::string& yaml_text);

// Reads and parses one file. Returns NotFound/InvalidArgument when it cannot be read or holds no
// document; otherwise the documents, each with its own errors.
StatusOr<std::vector<Document>> parse_manifest_file(const std::string& path);

// Decodes and validates an object as the apiserver returns it. On any problem returns
// InvalidArgument whose message lists every error, one per line.
StatusOr<Job> parse_job_json(const nlohmann::json& object);

// Exactly one valid job from YAML text, or InvalidArgument listing every problem.
StatusOr<Job> parse_job_yaml(const std::string& yaml_text);

// "RLJob" / "TSTPretrainJob", and the job's metadata.name.
const std::string& job_kind(const Job& job);
const std::string& job_name(const Job& job);

// Joins errors one per line, "path: message".
std::string join_errors(const FieldErrors& errors);

}  // namespace tlt::api
