// CustomResourceDefinitions for RLJob and TSTPretrainJob, generated from the field tables of
// api/spec.h, so the apiserver checks what `tlt validate` checks.
//
// The schema is structural OpenAPI v3 as apiextensions.k8s.io/v1 wants it:
//   - types and formats from the C++ types (int32_t -> integer/int32, Duration -> string with
//     a pattern, Quantity -> int-or-string with Kubernetes' quantity syntax, FreeForm -> an
//     object with x-kubernetes-preserve-unknown-fields);
//   - ranges (minimum/maximum, exclusive or not), enums and required fields from each Rule;
//   - descriptions from Rule::doc;
//   - defaults from the member initialisers (spec only; objects default to {} so that the
//     apiserver fills in every nested default, as `tlt` does when it decodes YAML);
//   - the cross-field rules of each struct's check() (api/validate.cc) as CEL
//     x-kubernetes-validations, reported at the same field path, whose messages say what to
//     fix. Every struct with a check() must have CEL rules in schema_rules.cc (the build fails
//     otherwise). The messages leave out the offending numbers: the apiserver refuses a
//     messageExpression with string(int) as too costly.
//
// Where the apiserver and `tlt validate` still differ (tests/operator/crd_apiserver.sh runs
// every malformed manifest of tests/manifests/bad against a real apiserver and lists them):
// kubectl reads YAML 1.1 (`yes` is true) and keeps the last of duplicate keys; unquoted
// fractional quantities (`cpu: 1.5`) are numbers, which an int-or-string field refuses as
// Kubernetes' own Pod fields do.
//
// Thread safety: stateless functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::api {

// The kinds a CRD is generated for, in a fixed order: {"RLJob", "TSTPretrainJob"}.
const std::vector<std::string>& crd_kinds();

// The openAPIV3Schema of `kind` (the whole object: apiVersion, kind, metadata, spec, status).
// Returns InvalidArgument for an unknown kind.
StatusOr<nlohmann::ordered_json> openapi_schema(const std::string& kind);

// The whole CustomResourceDefinition object of `kind`: names (plural, short name, category
// tlt), status and scale subresources, printer columns and the schema above. Returns
// InvalidArgument for an unknown kind.
StatusOr<nlohmann::ordered_json> custom_resource_definition(const std::string& kind);

// "rljobs.tlt.dev" / "tstpretrainjobs.tlt.dev": the CRD's metadata.name, also the file name
// (plus ".yaml") under crds/. Returns "" for an unknown kind.
std::string crd_name(const std::string& kind);

// The CRD of `kind` as a YAML document with a header comment that says it is generated.
// Deterministic: the same binary always writes the same bytes. Returns InvalidArgument for
// an unknown kind.
StatusOr<std::string> crd_yaml(const std::string& kind);

// Block-style YAML for a JSON value: keys in the order given, strings double-quoted (JSON
// escapes are valid YAML), numbers written so that YAML 1.1 and 1.2 readers both see numbers.
std::string to_yaml_text(const nlohmann::ordered_json& value);

}  // namespace tlt::api
