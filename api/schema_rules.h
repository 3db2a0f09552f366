// The checks of the CRD schema beyond plain OpenAPI, for api/schema.cc: the syntax of the
// string-typed values as regular expressions, and the cross-field rules of api/validate.cc
// written once more in CEL (x-kubernetes-validations). Internal to api/.
//
// One function per struct that has a check() in validate.cc, same order, same messages less the
// values: the apiserver's cost estimate of string(int) is unbounded, so a messageExpression that
// prints a number is refused, and only strings are quoted back. `self` is the struct's object;
// fieldPath makes the apiserver report the error at the same path as `tlt validate` (list
// indexes aside). Fields with defaults are always present (the schema defaults every object),
// so only fields without a default need has().
//
// Thread safety: constants and stateless functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/spec.h"

namespace tlt::api {

// Syntax of the string-typed values, as regular expressions that RE2 (the apiserver) and
// std::regex (schema_test.cc) read alike. Each matches exactly what field.cc's checker accepts.
inline constexpr const char* kDurationPattern = "^(([0-9]+\\.?[0-9]*|\\.[0-9]+)(ns|us|ms|s|m|h))+$";
inline constexpr const char* kQuantityPattern =
    "^[+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$";
inline constexpr const char* kDnsLabelPattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
inline constexpr const char* kUrlPattern = "^https?://[^ \\t\\n]+$";
inline constexpr int kMaxSyntaxLength = 64;  // parse_duration and is_quantity refuse longer text
// What url_path_problem refuses, one pattern per check (a URL matching either is refused).
inline constexpr const char* kUrlDotSegment =
    "^https?://[^/?#]*(/[^?#]*)?/(\\.|%2[eE]){1,2}([/?#;]|$)";
inline constexpr const char* kUrlEncodedSlash = "^https?://[^?#]*(%2[fF]|%5[cC]|\\\\)";

// One x-kubernetes-validations entry.
struct CelRule {
  std::string rule;
  std::string message;             // fallback when message_expression cannot be evaluated
  std::string message_expression;  // "" for none
  std::string field_path;          // relative to self, e.g. ".path"; "" for self
};

// The rules of each struct that has a check() (the schema walker calls cel_rules(v) for each; a
// struct without an overload here fails the build).
std::vector<CelRule> cel_rules(const ModelSpec&);
std::vector<CelRule> cel_rules(const DrafterRoleSpec&);
std::vector<CelRule> cel_rules(const RLRolesSpec&);
std::vector<CelRule> cel_rules(const SelectorSpec&);
std::vector<CelRule> cel_rules(const SpeculativeSpec&);
std::vector<CelRule> cel_rules(const RebalancingSpec&);
std::vector<CelRule> cel_rules(const TaskSpec&);
std::vector<CelRule> cel_rules(const RewardSpec&);
std::vector<CelRule> cel_rules(const RLJobSpec&);
std::vector<CelRule> cel_rules(const DataSpec&);
std::vector<CelRule> cel_rules(const TrainingSpec&);
std::vector<CelRule> cel_rules(const TSTPretrainJobSpec&);

// url_path_problem's checks, on a url() field (`self` is the string).
std::vector<CelRule> url_rules();

// ObjectMeta::check, at the root (CEL sees metadata.name and generateName only from there).
std::vector<CelRule> metadata_rules();

// The rules as an x-kubernetes-validations list.
nlohmann::ordered_json cel_json(const std::vector<CelRule>& rules);

}  // namespace tlt::api
