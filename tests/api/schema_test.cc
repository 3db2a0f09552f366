// The generated CRD schema against the api it is generated from: defaults the apiserver would
// fill in equal tlt's own defaults (on an empty spec and on every example), string patterns
// accept exactly what field.cc's checkers accept, every schema node is structural, printer
// columns and the scale subresource point at fields that exist, and the YAML text reads back
// as the same object. (That the apiserver accepts the CRDs and enforces their CEL rules is
// tests/operator/crd_apiserver.sh's job.)
#include "api/schema.h"

#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "api/decode.h"
#include "api/device_name.h"
#include "api/encode.h"
#include "api/manifest.h"
#include "api/validate.h"

namespace tlt::api {
namespace {

using Json = nlohmann::json;

Json plain(const nlohmann::ordered_json& j) {
  return Json::parse(j.dump());
}

Json schema_of(const std::string& kind) {
  StatusOr<nlohmann::ordered_json> s = openapi_schema(kind);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? plain(*s) : Json();
}

// Structural defaulting as the apiserver does it: absent properties with a default get it,
// then every present property is defaulted in turn (so a defaulted object gets its nested
// defaults too); list items are defaulted by the items schema.
void apply_defaults(const Json& schema, Json* value) {
  if (value->is_object() && schema.contains("properties")) {
    for (auto& [key, prop] : schema["properties"].items()) {
      if (!value->contains(key) && prop.contains("default")) (*value)[key] = prop["default"];
      if (value->contains(key)) apply_defaults(prop, &(*value)[key]);
    }
  }
  if (value->is_array() && schema.contains("items")) {
    for (Json& item : *value) apply_defaults(schema["items"], &item);
  }
}

// Calls f(path, node) for every schema node below `schema` (properties, items, map values).
template <class F>
void walk(const Json& schema, const std::string& path, F f) {
  f(path, schema);
  if (schema.contains("properties")) {
    for (auto& [key, prop] : schema["properties"].items()) walk(prop, path + "." + key, f);
  }
  if (schema.contains("items")) walk(schema["items"], path + "[]", f);
  if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
    walk(schema["additionalProperties"], path + ".*", f);
  }
}

// The schema node at a JSONPath such as ".spec.roles.rollout.replicas", or null.
Json at(const Json& root, const std::string& json_path) {
  Json node = root;
  size_t pos = 1;
  while (pos <= json_path.size()) {
    // A filter ("conditions[?(@.type==\"Admitted\")]") selects items of an array.
    size_t filter = json_path.find("[?(", pos), dot = json_path.find('.', pos);
    bool filtered = filter != std::string::npos && filter < dot;
    if (filtered) dot = json_path.find('.', json_path.find(")]", filter));
    std::string key = json_path.substr(
        pos, (filtered ? filter : dot == std::string::npos ? json_path.size() : dot) - pos);
    if (!node.contains("properties") || !node["properties"].contains(key)) return Json();
    node = node["properties"][key];
    if (filtered) {
      if (!node.contains("items")) return Json();
      node = node["items"];
    }
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return node;
}

TEST(Schema, Defaults_EmptySpec_EqualTltDefaults) {
  Json rl = Json::object(), tst = Json::object();
  apply_defaults(schema_of(kRLJobKind)["properties"]["spec"], &rl);
  apply_defaults(schema_of(kTSTPretrainJobKind)["properties"]["spec"], &tst);
  EXPECT_EQ(rl, to_json(RLJobSpec{})) << "diff: " << Json::diff(rl, to_json(RLJobSpec{})).dump();
  EXPECT_EQ(tst, to_json(TSTPretrainJobSpec{}))
      << "diff: " << Json::diff(tst, to_json(TSTPretrainJobSpec{})).dump();
}

TEST(Schema, Defaults_EveryExample_EqualDecodedSpec) {
  for (const char* name :
       {"rljob-tiny.yaml", "rljob-cluster.yaml", "tst-tiny.yaml", "tst-cluster.yaml"}) {
    std::string path = std::string(TLT_SOURCE_DIR) + "/examples/" + name;
    StatusOr<std::vector<Document>> docs = parse_manifest_file(path);
    ASSERT_TRUE(docs.ok()) << docs.status().to_string();
    ASSERT_EQ(docs->size(), 1u);
    ASSERT_TRUE((*docs)[0].ok()) << join_errors((*docs)[0].errors);
    const Job& job = *(*docs)[0].job;
    Json want = std::visit([](const auto& j) { return to_json(j)["spec"]; }, job);
    Json spec = yaml_to_json(YAML::LoadFile(path))["spec"];
    apply_defaults(schema_of(job_kind(job))["properties"]["spec"], &spec);
    EXPECT_EQ(spec, want) << name << " diff: " << Json::diff(spec, want).dump();
  }
}

TEST(Schema, Structural_EveryNodeHasAType) {
  for (const std::string& kind : crd_kinds()) {
    walk(schema_of(kind), "", [&](const std::string& path, const Json& node) {
      bool typed = node.contains("type") || node.value("x-kubernetes-int-or-string", false) ||
                   node.value("x-kubernetes-preserve-unknown-fields", false);
      EXPECT_TRUE(typed) << kind << path << " has no type";
      EXPECT_FALSE(node.contains("$ref")) << kind << path;
    });
  }
}

TEST(Schema, Status_HasNoDefaults) {
  for (const std::string& kind : crd_kinds()) {
    walk(schema_of(kind)["properties"]["status"], ".status",
         [&](const std::string& path, const Json& node) {
           EXPECT_FALSE(node.contains("default")) << kind << path;
         });
  }
}

TEST(Schema, Rules_BecomeRangesEnumsAndDescriptions) {
  Json s = schema_of(kRLJobKind);
  Json t = at(s, ".spec.algorithm.temperature");
  EXPECT_EQ(t["type"], "number");
  EXPECT_EQ(t["minimum"], 0);
  EXPECT_EQ(t["exclusiveMinimum"], true);
  EXPECT_EQ(t["maximum"], 10);
  EXPECT_FALSE(t.contains("exclusiveMaximum"));
  EXPECT_EQ(t["description"], "Rollout sampling temperature.");
  Json trainer = at(s, ".spec.roles.trainer.replicas");
  EXPECT_EQ(trainer["maximum"], 4096) << "promptsPerStep bounds it further (a CEL rule)";
  EXPECT_EQ(at(s, ".spec.roles.rollout.replicas")["maximum"], 4096);
  Json port = at(s, ".spec.metrics.port");
  EXPECT_EQ(port["format"], "int32");
  EXPECT_EQ(port["maximum"], 65535);
  EXPECT_EQ(at(s, ".spec.task.name")["enum"], Json::array({"", "arithmetic-cot", "countdown"}));
  Json arms = at(s, ".spec.speculative.arms");
  EXPECT_EQ(arms["maxItems"], 64);
  EXPECT_EQ(arms["items"]["maxLength"], 16);
  Json pod_template = at(s, ".spec.roles.rollout.podTemplate");
  EXPECT_EQ(pod_template["x-kubernetes-preserve-unknown-fields"], true);
  EXPECT_EQ(pod_template["type"], "object");
  EXPECT_FALSE(at(s, ".spec.ttlSecondsAfterFinished").contains("default"));
}

TEST(Schema, CrossFieldRules_OnEveryCheckedStruct) {
  Json rl = schema_of(kRLJobKind), tst = schema_of(kTSTPretrainJobKind);
  for (const char* p : {".spec", ".spec.model", ".spec.roles", ".spec.roles.drafter",
                        ".spec.speculative", ".spec.speculative.selector", ".spec.rebalancing"}) {
    EXPECT_FALSE(at(rl, p).value("x-kubernetes-validations", Json::array()).empty()) << p;
  }
  for (const char* p : {".spec", ".spec.model", ".spec.data", ".spec.training"}) {
    EXPECT_FALSE(at(tst, p).value("x-kubernetes-validations", Json::array()).empty()) << p;
  }
  EXPECT_FALSE(rl.value("x-kubernetes-validations", Json::array()).empty()) << "metadata rules";
  // Every rule says what to fix, and every fieldPath names a field that exists.
  for (const Json* root : {&rl, &tst}) {
    walk(*root, "", [&](const std::string& path, const Json& node) {
      for (const Json& r : node.value("x-kubernetes-validations", Json::array())) {
        EXPECT_FALSE(r.value("message", "").empty()) << path << ": " << r.dump();
        if (r.contains("fieldPath")) {
          EXPECT_FALSE(at(node, r["fieldPath"].get<std::string>()).is_null())
              << path << ": " << r.dump();
        }
      }
    });
  }
}

TEST(Schema, Patterns_AcceptExactlyWhatFieldCheckersAccept) {
  Json s = schema_of(kRLJobKind);
  std::regex duration(at(s, ".spec.rebalancing.window")["pattern"].get<std::string>());
  Json q_schema = at(s, ".spec.roles.rollout.resources.requests")["additionalProperties"];
  ASSERT_EQ(q_schema["minimum"], 0) << "an integer quantity is non-negative";
  ASSERT_EQ(q_schema["maxLength"], 64) << "as is_quantity";
  std::regex quantity(q_schema["pattern"].get<std::string>());
  for (const char* d :
       {"60s", "1m30s", "500ms", "2h",  "1.5h", ".5s", "1.s", "3us", "7ns",    "1h2m3.5s", "",
        "60",  "s",     "1..5s", "1 s", "5ms3", "-1s", "1d",  ".s",  "1.2.3s", "1msm",     "1sm"}) {
    double seconds = 0;
    EXPECT_EQ(std::regex_match(d, duration), parse_duration(d, &seconds)) << "\"" << d << "\"";
  }
  for (const char* q : {"2",     "500m", "8Gi", "1e3",    "1E-3", "+5", "-5",    ".5",   "5.",
                        "1.5Ki", "3E",   "",    "8 gigs", "Gi",   "1e", "1.5.5", "1Ki2", "1KiB",
                        "e3",    "0x10", ".",   "1e+",    "2k",   "2K", "-0",    "-.5",  "+.5Mi"}) {
    EXPECT_EQ(std::regex_match(q, quantity), is_quantity(q)) << "\"" << q << "\"";
  }
  std::regex device(at(s, ".spec.model.device")["pattern"].get<std::string>());
  for (const char* d : {"auto",  "cpu",     "cuda", "cuda:0", "cuda:7",  "cuda:01",    "cuda:9999",
                        "",      "gpu",     "CUDA", "cuda:",  "cuda:-1", "cuda:10000", "cuda:1a",
                        "cuda0", "cuda:0 ", " cpu", "cpu:0",  "mps",     "cuda:+1"}) {
    EXPECT_EQ(std::regex_match(d, device), parse_device_name(d).has_value()) << "\"" << d << "\"";
  }
}

// The CEL rules on a url() field refuse exactly what url_path_problem refuses.
TEST(Schema, UrlRules_RefuseExactlyWhatTheValidatorRefuses) {
  Json url = at(schema_of(kRLJobKind), ".spec.reward.url");
  EXPECT_EQ(url["maxLength"], kMaxUrlLength);
  std::vector<std::regex> refusals;
  for (const Json& r : url.value("x-kubernetes-validations", Json::array())) {
    std::string rule = r["rule"];
    const std::string head = "!self.matches(r'", tail = "')";
    ASSERT_EQ(rule.compare(0, head.size(), head), 0) << rule;
    ASSERT_EQ(rule.compare(rule.size() - tail.size(), tail.size(), tail), 0) << rule;
    refusals.emplace_back(rule.substr(head.size(), rule.size() - head.size() - tail.size()));
  }
  ASSERT_EQ(refusals.size(), 2u) << url.dump();
  EXPECT_EQ(
      at(schema_of(kRLJobKind), ".spec.rebalancing.prometheusURL")["x-kubernetes-validations"],
      url["x-kubernetes-validations"]);
  for (const char* u : {"http://h/v1/score/../../admin",
                        "http://h/v1/score/%2e%2e/admin",
                        "http://h/v1/%2E%2E/x",
                        "http://h/v1/score/./x",
                        "http://h/..",
                        "http://h/.",
                        "http://h/v1/%2e.#x",
                        "http://h/v1/.%2E?x",
                        "http://h/a/..;x/b",
                        "http://h/a%2fb",
                        "http://h/a%2F..",
                        "http://h/a%5Cb",
                        "http://h/a\\b",
                        "http://h\\@evil/x",
                        "http://h",
                        "http://h/",
                        "https://h:8/v1/score",
                        "http://h/.../x",
                        "http://h/a.b/..c/c..",
                        "http://h/%2e%2e%2e",
                        "http://h/%2ex",
                        "http://h/v1?x=/../..",
                        "http://h/v1#/../",
                        "http://h/v1?p=%2f",
                        "http://h/a%2",
                        "http://h/a%",
                        "http://../x",
                        "http://h/%%2e%2e/x",
                        "http://h/x/%2e%2"}) {
    bool refused = false;
    for (const std::regex& r : refusals) refused = refused || std::regex_search(u, r);
    EXPECT_EQ(refused, !url_path_problem(u).empty()) << u;
  }
}

TEST(Schema, Crd_ScaleAndPrinterColumnsPointAtRealFields) {
  for (const std::string& kind : crd_kinds()) {
    StatusOr<nlohmann::ordered_json> crd = custom_resource_definition(kind);
    ASSERT_TRUE(crd.ok());
    Json c = plain(*crd);
    EXPECT_EQ(c["metadata"]["name"], crd_name(kind));
    EXPECT_EQ(c["spec"]["group"], "tlt.dev");
    EXPECT_EQ(c["spec"]["names"]["categories"], Json::array({"tlt"}));
    const Json& v = c["spec"]["versions"][0];
    EXPECT_EQ(v["name"], "v1alpha1");
    const Json& schema = v["schema"]["openAPIV3Schema"];
    const Json& scale = v["subresources"]["scale"];
    Json replicas = at(schema, scale["specReplicasPath"].get<std::string>());
    EXPECT_EQ(replicas["type"], "integer") << kind;
    EXPECT_EQ(at(schema, scale["statusReplicasPath"].get<std::string>())["type"], "integer");
    std::vector<std::string> names;
    for (const Json& col : v["additionalPrinterColumns"]) {
      names.push_back(col["name"]);
      std::string p = col["jsonPath"];
      if (p.rfind(".metadata.", 0) == 0) continue;
      Json field = at(schema, p);
      ASSERT_FALSE(field.is_null()) << kind << " column " << col["name"] << ": " << p;
      EXPECT_EQ(field["type"], col["type"]) << kind << " column " << col["name"];
    }
    EXPECT_EQ(names.front(), "Phase");
    EXPECT_EQ(names.back(), "Age");
  }
  EXPECT_EQ(crd_name(kRLJobKind), "rljobs.tlt.dev");
  EXPECT_EQ(crd_name("Pod"), "");
  EXPECT_FALSE(custom_resource_definition("Pod").ok());
}

TEST(Schema, Yaml_ReadsBackAsTheSameObject) {
  for (const std::string& kind : crd_kinds()) {
    StatusOr<std::string> text = crd_yaml(kind);
    ASSERT_TRUE(text.ok());
    Json back = yaml_to_json(YAML::Load(*text));
    Json want = plain(*custom_resource_definition(kind));
    EXPECT_EQ(back, want) << kind << " diff: " << Json::diff(back, want).dump();
  }
  // Floats keep a dot so YAML 1.1 readers (kubectl) see numbers, and reserved words are quoted.
  nlohmann::ordered_json j{{"a", 1e-05}, {"b", "yes"}, {"c", "on"}, {"d", "plain-word"}};
  EXPECT_EQ(to_yaml_text(j), "a: 1.0e-05\nb: \"yes\"\nc: \"on\"\nd: plain-word\n");
}

TEST(Schema, Bounds_TheCrdNeedsAreValidatedToo) {
  RLJob job;
  job.metadata.name = "x";
  job.spec.speculative.arms.assign(65, "ngram");
  job.spec.speculative.arms.push_back("1_1_1_with_a_long_tail");
  FieldErrors errors;
  validate(job, &errors);
  std::string all;
  for (const FieldError& e : errors) all += e.to_string() + "\n";
  EXPECT_NE(all.find("spec.speculative.arms: must list at most 64 items (got 66)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("spec.speculative.arms[65]: must be at most 16 characters (got 22)"),
            std::string::npos)
      << all;
}

}  // namespace
}  // namespace tlt::api
