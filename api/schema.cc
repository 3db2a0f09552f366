// CRD generation: a visitor over the field tables that writes structural OpenAPI v3, with the
// patterns and CEL rules of api/schema_rules.h.
#include "api/schema.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "api/device_name.h"
#include "api/schema_rules.h"
#include "api/spec.h"
#include "api/validate.h"

namespace tlt::api {
namespace {

using Json = nlohmann::ordered_json;

// ---- the schema walker ------------------------------------------------------------------------

// "60s", "0.5s": a duration literal both Go (CEL's duration()) and parse_duration read.
std::string seconds_text(double seconds) {
  char buf[48];
  if (std::floor(seconds) == seconds && std::fabs(seconds) < 1e15) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(seconds));
  } else {
    std::snprintf(buf, sizeof buf, "%.9fs", seconds);
  }
  return buf;
}

// A whole number stays an integer in the output (minimum: 1, not 1.0).
Json number(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return static_cast<int64_t>(v);
  return v;
}

void add_range(const Rule& r, Json* s) {
  if (r.min) {
    (*s)["minimum"] = number(*r.min);
    if (r.min_exclusive) (*s)["exclusiveMinimum"] = true;
  }
  if (r.max) {
    (*s)["maximum"] = number(*r.max);
    if (r.max_exclusive) (*s)["exclusiveMaximum"] = true;
  }
}

// Options of one walk: spec schemas carry defaults, status schemas do not (the operator writes
// the whole status).
struct WalkOptions {
  bool defaults = true;
};

class SchemaBuilder;

// Visits one struct's field table and fills `properties` and `required`.
class FieldsVisitor {
 public:
  FieldsVisitor(const SchemaBuilder& builder, Json* properties, Json* required)
      : builder_(builder), properties_(properties), required_(required) {}
  template <class T>
  void operator()(const char* key, T& value, const Rule& rule);

 private:
  const SchemaBuilder& builder_;
  Json* properties_;
  Json* required_;
};

class SchemaBuilder {
 public:
  explicit SchemaBuilder(WalkOptions options) : options_(options) {}

  // The schema of one field holding `v` (its current value is the default), without the
  // description; `rule` is the field's Rule (an empty Rule for list items and map values).
  Json of(const int32_t& v, const Rule& r) const { return integer(v, "int32", r); }
  Json of(const int64_t& v, const Rule& r) const { return integer(v, "int64", r); }
  Json of(const double& v, const Rule& r) const {
    Json s{{"type", "number"}};
    add_range(r, &s);
    if (options_.defaults) s["default"] = v;
    return s;
  }
  Json of(const bool& v, const Rule&) const {
    Json s{{"type", "boolean"}};
    if (options_.defaults) s["default"] = v;
    return s;
  }
  Json of(const std::string& v, const Rule& r) const;
  Json of(const Duration& v, const Rule& r) const;
  Json of(const Quantity&, const Rule&) const {
    // Non-negative: a string matches the pattern (no '-'), an integer is >= 0. (A structural
    // schema keeps the validations next to x-kubernetes-int-or-string, not in the anyOf.)
    return Json{{"anyOf", Json::array({Json{{"type", "integer"}}, Json{{"type", "string"}}})},
                {"x-kubernetes-int-or-string", true},
                {"minimum", 0},
                {"maxLength", kMaxSyntaxLength},
                {"pattern", kQuantityPattern}};
  }
  Json of(const FreeForm& v, const Rule&) const {
    Json s{{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
    if (options_.defaults) s["default"] = v.value;
    return s;
  }
  Json of(const Opaque&, const Rule&) const {
    return Json{{"x-kubernetes-preserve-unknown-fields", true}};
  }
  template <class T>
  Json of(const std::optional<T>&, const Rule& r) const {
    SchemaBuilder no_default({false});
    return no_default.of(T{}, r);  // unset means unset: no default
  }
  template <class T>
  Json of(const std::vector<T>& v, const Rule& r) const {
    Json s{{"type", "array"}, {"items", element(T{})}};
    if (r.required) s["minItems"] = 1;
    if (r.max_items) s["maxItems"] = *r.max_items;
    if constexpr (std::is_same_v<T, std::string>) {
      if (r.max_length) s["items"]["maxLength"] = *r.max_length;
    }
    if (options_.defaults) s["default"] = default_list(v);
    return s;
  }
  template <class T>
  Json of(const std::map<std::string, T>& v, const Rule& r) const {
    Json s{{"type", "object"}, {"additionalProperties", element(T{})}};
    if (r.required) s["minProperties"] = 1;
    if (options_.defaults && v.empty()) s["default"] = Json::object();
    return s;
  }
  template <class T, std::enable_if_t<is_described<T>::value, int> = 0>
  Json of(const T& v, const Rule&) const {
    Json s{{"type", "object"}};
    Json properties = Json::object(), required = Json::array();
    FieldsVisitor visitor(*this, &properties, &required);
    const_cast<T&>(v).fields(visitor);  // the visitor only reads
    s["properties"] = std::move(properties);
    if (!required.empty()) s["required"] = std::move(required);
    if constexpr (has_check<T>::value) s["x-kubernetes-validations"] = cel_json(cel_rules(v));
    if (options_.defaults) {
      // The whole default object, not {}: the apiserver checks a default against the CEL rules
      // without filling in the nested defaults first.
      Json def = Json::object();
      for (auto& [k, p] : s["properties"].items()) {
        if (p.contains("default")) def[k] = p["default"];
      }
      s["default"] = std::move(def);
    }
    return s;
  }

 private:
  Json integer(int64_t v, const char* format, const Rule& r) const {
    Json s{{"type", "integer"}, {"format", format}};
    add_range(r, &s);
    if (options_.defaults) s["default"] = v;
    return s;
  }
  // List items and map values: no default of their own (the list's or map's covers them).
  template <class T>
  Json element(const T& v) const {
    Json s = of(v, Rule());
    s.erase("default");
    return s;
  }
  template <class T>
  static Json default_list(const std::vector<T>& v) {
    Json out = Json::array();
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      for (const T& item : v) out.push_back(item);
    }
    return out;  // lists of objects default to empty
  }

  WalkOptions options_;
};

Json SchemaBuilder::of(const std::string& v, const Rule& r) const {
  Json s{{"type", "string"}};
  if (!r.one_of.empty()) s["enum"] = r.one_of;
  std::string pattern;
  if (r.format == Rule::Format::kDnsLabel) {
    pattern = kDnsLabelPattern;
    s["maxLength"] = 63;
  }
  if (r.format == Rule::Format::kDevice) {
    pattern = kDevicePattern;
    s["maxLength"] = 9;  // "cuda:NNNN"
  }
  if (r.format == Rule::Format::kUrl) {
    pattern = kUrlPattern;
    s["x-kubernetes-validations"] = cel_json(url_rules());
  }
  if (!pattern.empty()) {
    // An empty optional string is "unset", which validate.cc accepts (but not for a device).
    bool empty_ok = !r.required && r.format != Rule::Format::kDevice;
    s["pattern"] = empty_ok ? "^$|" + pattern : pattern;
  }
  if (r.required) s["minLength"] = 1;
  if (r.max_length) s["maxLength"] = *r.max_length;
  if (options_.defaults && !v.empty()) s["default"] = v;
  return s;
}

Json SchemaBuilder::of(const Duration& v, const Rule& r) const {
  Json s{{"type", "string"}, {"maxLength", kMaxSyntaxLength}, {"pattern", kDurationPattern}};
  if (options_.defaults) s["default"] = v.text;
  if (r.min || r.max) {
    // Durations are strings to OpenAPI; CEL's duration() reads the same syntax.
    std::vector<CelRule> rules;
    // A malformed duration gets the pattern's error only, not a CEL conversion error too.
    const std::string guard = "!self.matches(r'" + std::string(kDurationPattern) + "') || ";
    auto bound = [](double seconds) { return "duration('" + seconds_text(seconds) + "')"; };
    if (r.min) {
      std::string op = r.min_exclusive ? " > " : " >= ";
      std::string words = r.min_exclusive ? "must be longer than " : "must be at least ";
      rules.push_back(
          {guard + "duration(self)" + op + bound(*r.min), words + seconds_text(*r.min), "", ""});
    }
    if (r.max) {
      std::string op = r.max_exclusive ? " < " : " <= ";
      std::string words = r.max_exclusive ? "must be shorter than " : "must be at most ";
      rules.push_back(
          {guard + "duration(self)" + op + bound(*r.max), words + seconds_text(*r.max), "", ""});
    }
    s["x-kubernetes-validations"] = cel_json(rules);
  }
  return s;
}

template <class T>
void FieldsVisitor::operator()(const char* key, T& value, const Rule& rule) {
  Json s = builder_.of(value, rule);
  if (!rule.documentation.empty()) {
    // Description first: it reads better in `kubectl explain` and in the YAML.
    Json with_doc{{"description", rule.documentation}};
    for (auto& [k, v] : s.items()) with_doc[k] = v;
    s = std::move(with_doc);
  }
  if (rule.immutable) {
    Json& rules = s["x-kubernetes-validations"];
    if (rules.is_null()) rules = Json::array();
    rules.push_back(
        Json{{"rule", "self == oldSelf"},
             {"message", "is immutable; delete the job and create it anew to change it"}});
  }
  (*properties_)[key] = std::move(s);
  if (rule.required) required_->push_back(key);
}

// ---- the CRD around the schema ------------------------------------------------------------------

struct PrinterColumn {
  const char* name;
  const char* type;
  const char* json_path;
  const char* description;
};

// What differs between the two kinds besides their field tables.
struct KindInfo {
  const char* kind;
  const char* plural;
  const char* singular;
  const char* short_name;
  const char* description;
  const char* scale_spec_path;    // the replicas `kubectl scale` changes
  const char* scale_status_path;  // the matching count in status
  std::vector<PrinterColumn> columns;
};

const KindInfo* kind_info(const std::string& kind) {
  static const PrinterColumn kPhase{
      "Phase", "string", ".status.phase",
      "Pending, Running, Blocked, Suspended, Queued (waiting for Kueue), Succeeded or Failed."};
  // Kueue's admission of the job's Workload (operator/controller/kueue.h); empty without Kueue.
  static const PrinterColumn kAdmitted{"Admitted", "string",
                                       ".status.conditions[?(@.type==\"Admitted\")].status",
                                       "Whether Kueue admitted the job's Workload."};
  static const PrinterColumn kStep{"Step", "integer", ".status.step", "Last completed step."};
  static const PrinterColumn kAge{"Age", "date", ".metadata.creationTimestamp", ""};
  static const KindInfo kRL{
      kRLJobKind,
      "rljobs",
      "rljob",
      "rlj",
      "An RL job (GRPO) whose idle rollout GPUs train a speculative-decoding drafter.",
      ".spec.roles.rollout.replicas",
      ".status.roles.rollout.replicas",
      {kPhase,
       kStep,
       {"Reward", "number", ".status.reward", "Mean reward of the last step."},
       {"Reclaimed", "number", ".status.reclaimedGPUSeconds",
        "Idle GPU-seconds turned into drafter training."},
       kAdmitted,
       kAge}};
  // A TSTPretrainJob has no idle rollout GPUs to reclaim; its third number is the phase of
  // token superposition instead.
  static const KindInfo kTST{
      kTSTPretrainJobKind,
      "tstpretrainjobs",
      "tstpretrainjob",
      "tstj",
      "Token-superposition pretraining: bags of tokens first, then plain next-token recovery.",
      ".spec.workers.replicas",
      ".status.workers.replicas",
      {kPhase,
       kStep,
       {"Loss", "number", ".status.loss", "Training loss of the last step."},
       {"Training", "string", ".status.trainingPhase", "superposition, recovery or baseline."},
       kAdmitted,
       kAge}};
  if (kind == kRLJobKind) return &kRL;
  if (kind == kTSTPretrainJobKind) return &kTST;
  return nullptr;
}

template <class Job>
Json object_schema(const KindInfo& info) {
  Job job;
  Json spec = SchemaBuilder({true}).of(job.spec, Rule());
  Json status = SchemaBuilder({false}).of(job.status, Rule());
  Json s{{"description", info.description}, {"type", "object"}};
  s["properties"] = Json{
      {"apiVersion", Json{{"description", "tlt.dev/v1alpha1"}, {"type", "string"}}},
      {"kind", Json{{"description", std::string("Kind of job: ") + info.kind}, {"type", "string"}}},
      {"metadata", Json{{"type", "object"}}},
      {"spec", Json{{"description", "What to run."}}},
      {"status", Json{{"description", "What happened (set by the operator)."}}},
  };
  for (auto& [k, v] : spec.items()) s["properties"]["spec"][k] = v;
  for (auto& [k, v] : status.items()) s["properties"]["status"][k] = v;
  s["x-kubernetes-validations"] = cel_json(metadata_rules());
  return s;
}

// ---- YAML text -----------------------------------------------------------------------------

// A word that any YAML reader (1.1 or 1.2) takes as a string when written without quotes.
bool is_plain_word(const std::string& s) {
  static const char* kReserved[] = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"};
  if (s.empty() || s.size() > 80 || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  std::string lower;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
        c != '/') {
      return false;
    }
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (const char* r : kReserved) {
    if (lower == r) return false;
  }
  return true;
}

std::string scalar_text(const Json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return is_plain_word(s) ? s : v.dump();  // JSON's double-quoted string is YAML too
  }
  if (v.is_object()) return "{}";
  if (v.is_array()) return "[]";
  std::string s = v.dump();
  // "1e-05" is a string to YAML 1.1 readers (kubectl's); "1.0e-05" is a number to all.
  if (v.is_number_float() && s.find('e') != std::string::npos && s.find('.') == std::string::npos) {
    s.insert(s.find('e'), ".0");
  }
  return s;
}

bool is_leaf(const Json& v) {
  return v.is_primitive() || v.empty();
}

void emit_yaml(const Json& v, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (auto& [k, item] : v.items()) {
      std::string key = is_plain_word(k) ? k : Json(k).dump();
      if (is_leaf(item)) {
        *out += pad + key + ": " + scalar_text(item) + "\n";
      } else {
        *out += pad + key + ":\n";
        emit_yaml(item, indent + 2, out);
      }
    }
    return;
  }
  for (const Json& item : v) {
    if (is_leaf(item)) {
      *out += pad + "- " + scalar_text(item) + "\n";
    } else if (item.is_object()) {
      std::string nested;
      emit_yaml(item, indent + 2, &nested);
      *out += pad + "- " + nested.substr(indent + 2);  // first key on the dash's line
    } else {
      *out += pad + "-\n";
      emit_yaml(item, indent + 2, out);
    }
  }
}

}  // namespace

const std::vector<std::string>& crd_kinds() {
  static const std::vector<std::string> kKinds{kRLJobKind, kTSTPretrainJobKind};
  return kKinds;
}

std::string crd_name(const std::string& kind) {
  const KindInfo* info = kind_info(kind);
  return info ? std::string(info->plural) + "." + kGroup : "";
}

StatusOr<nlohmann::ordered_json> openapi_schema(const std::string& kind) {
  const KindInfo* info = kind_info(kind);
  if (!info) {
    return Status::InvalidArgument("unknown kind \"" + kind + "\"; use RLJob or TSTPretrainJob");
  }
  if (kind == kRLJobKind) return object_schema<RLJob>(*info);
  return object_schema<TSTPretrainJob>(*info);
}

StatusOr<nlohmann::ordered_json> custom_resource_definition(const std::string& kind) {
  StatusOr<Json> schema = openapi_schema(kind);
  if (!schema.ok()) return schema.status();
  const KindInfo& info = *kind_info(kind);
  Json columns = Json::array();
  for (const PrinterColumn& c : info.columns) {
    Json col{{"name", c.name}, {"type", c.type}, {"jsonPath", c.json_path}};
    if (*c.description) col["description"] = c.description;
    columns.push_back(col);
  }
  Json version{
      {"name", kVersion},
      {"served", true},
      {"storage", true},
      {"subresources", Json{{"status", Json::object()},
                            {"scale", Json{{"specReplicasPath", info.scale_spec_path},
                                           {"statusReplicasPath", info.scale_status_path}}}}},
      {"additionalPrinterColumns", columns},
      {"schema", Json{{"openAPIV3Schema", std::move(*schema)}}},
  };
  return Json{
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", Json{{"name", crd_name(kind)}}},
      {"spec", Json{{"group", kGroup},
                    {"names", Json{{"kind", info.kind},
                                   {"listKind", std::string(info.kind) + "List"},
                                   {"plural", info.plural},
                                   {"singular", info.singular},
                                   {"shortNames", Json::array({info.short_name})},
                                   {"categories", Json::array({"tlt"})}}},
                    {"scope", "Namespaced"},
                    {"versions", Json::array({version})}}},
  };
}

StatusOr<std::string> crd_yaml(const std::string& kind) {
  StatusOr<Json> crd = custom_resource_definition(kind);
  if (!crd.ok()) return crd.status();
  return "# Generated from api/spec.h by `tlt-operator --print-crds`; do not edit.\n"
         "# Regenerate with scripts/update-crds.sh (tests/operator/crds_current.sh checks it).\n" +
         to_yaml_text(*crd);
}

std::string to_yaml_text(const nlohmann::ordered_json& value) {
  if (is_leaf(value)) return scalar_text(value) + "\n";
  std::string out;
  emit_yaml(value, 0, &out);
  return out;
}

}  // namespace tlt::api
