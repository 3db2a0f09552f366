#include "api/decode.h"

#include <gtest/gtest.h>

#include "api/encode.h"

namespace tlt::api {
namespace {

RLJob decode_rl(const std::string& yaml, FieldErrors* errors) {
  RLJob job;
  decode(YAML::Load(yaml), &job, errors);
  return job;
}

const char* kMinimal = R"(
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: a}
spec: {}
)";

TEST(Decode, AbsentFieldsKeepDefaults) {
  FieldErrors errors;
  RLJob job = decode_rl(kMinimal, &errors);
  EXPECT_TRUE(errors.empty());
  RLJobSpec defaults;
  EXPECT_EQ(job.spec.algorithm.steps, defaults.algorithm.steps);
  EXPECT_EQ(job.spec.roles.rollout.replicas, 2);
  EXPECT_EQ(job.spec.speculative.arms, defaults.speculative.arms);
  EXPECT_DOUBLE_EQ(job.spec.rebalancing.window.seconds, 60);
  EXPECT_EQ(job.spec.model.effective_preset(), "tiny");
}

TEST(Decode, NullMeansDefault) {
  FieldErrors errors;
  RLJob job = decode_rl(R"(
kind: RLJob
metadata: {name: a}
spec: {algorithm: {steps: ~}}
)",
                        &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(job.spec.algorithm.steps, AlgorithmSpec().steps);
}

TEST(Decode, ReportsEveryTypeErrorWithPath) {
  FieldErrors errors;
  decode_rl(R"(
kind: RLJob
metadata: {name: a}
spec:
  algorithm: {steps: ten, temperature: [1], seed: 1.5}
  speculative: {enabled: maybe, arms: "8_4_48"}
  roles: {rollout: 3}
)",
            &errors);
  std::vector<std::string> paths;
  for (const FieldError& e : errors) paths.push_back(e.path);
  std::vector<std::string> want{"spec.algorithm.steps",     "spec.algorithm.temperature",
                                "spec.algorithm.seed",      "spec.roles.rollout",
                                "spec.speculative.enabled", "spec.speculative.arms"};
  std::sort(paths.begin(), paths.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(paths, want);
}

TEST(Decode, IntegerOverflowIsAnError) {
  FieldErrors errors;
  decode_rl("kind: RLJob\nmetadata: {name: a}\nspec: {algorithm: {steps: 99999999999}}\n", &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "spec.algorithm.steps");
  EXPECT_NE(errors[0].message.find("between"), std::string::npos) << errors[0].message;
}

TEST(Decode, NonFiniteNumbersAreErrors) {
  for (const char* v : {".inf", "nan", "0x10", "1e999"}) {
    FieldErrors errors;
    decode_rl(std::string("kind: RLJob\nmetadata: {name: a}\nspec: {algorithm: {temperature: ") +
                  v + "}}\n",
              &errors);
    ASSERT_EQ(errors.size(), 1u) << v;
    EXPECT_EQ(errors[0].path, "spec.algorithm.temperature");
  }
}

TEST(Decode, UnknownFieldSuggestsNearestOrListsKnown) {
  FieldErrors errors;
  decode_rl("kind: RLJob\nmetadata: {name: a}\nspec: {algoritm: {}, zzzzzzzzzz: 1}\n", &errors);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].to_string(), "spec.algoritm: unknown field; did you mean \"algorithm\"?");
  EXPECT_EQ(errors[1].path, "spec.zzzzzzzzzz");
  EXPECT_NE(errors[1].message.find("known fields here: model, task"), std::string::npos);
}

TEST(Decode, ApiserverMetadataIsAccepted) {
  FieldErrors errors;
  RLJob job = decode_rl(R"(
kind: RLJob
metadata:
  name: a
  namespace: ns
  uid: 1234
  resourceVersion: "77"
  generation: 3
  creationTimestamp: "2026-01-01T00:00:00Z"
  managedFields: [{manager: kubectl}]
spec: {}
)",
                        &errors);
  EXPECT_TRUE(errors.empty()) << errors[0].to_string();
  EXPECT_EQ(job.metadata.generation, 3);
  EXPECT_EQ(job.metadata.resource_version, "77");
}

TEST(Decode, PodTemplateIsKeptAsJson) {
  FieldErrors errors;
  RLJob job = decode_rl(R"(
kind: RLJob
metadata: {name: a}
spec:
  roles:
    rollout:
      podTemplate:
        spec:
          nodeSelector: {gpu: "true", zone: a}
          priority: 5
          tolerations: [{key: k, operator: Exists}]
)",
                        &errors);
  ASSERT_TRUE(errors.empty());
  const nlohmann::json& t = job.spec.roles.rollout.pod_template.value;
  EXPECT_EQ(t["spec"]["nodeSelector"]["gpu"], "true") << "quoted scalars stay strings";
  EXPECT_EQ(t["spec"]["priority"], 5);
  EXPECT_EQ(t["spec"]["tolerations"][0]["operator"], "Exists");
}

TEST(Decode, JsonRoundTripPreservesEverything) {
  FieldErrors errors;
  RLJob job = decode_rl(R"(
kind: RLJob
metadata: {name: a, labels: {team: x}}
spec:
  algorithm: {steps: 7, temperature: 0.7}
  roles: {rollout: {replicas: 5, resources: {limits: {nvidia.com/gpu: "1"}}}}
  speculative: {arms: ["4_1_5", "ngram"], selector: {buckets: [1, 3]}}
  rebalancing: {window: 2m}
  ttlSecondsAfterFinished: 60
)",
                        &errors);
  ASSERT_TRUE(errors.empty());
  nlohmann::json j = to_json(job);
  RLJob back;
  FieldErrors back_errors;
  decode(json_to_yaml(j), &back, &back_errors);
  ASSERT_TRUE(back_errors.empty()) << back_errors[0].to_string();
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.spec.algorithm.steps, 7);
  EXPECT_EQ(back.spec.roles.rollout.resources.limits.at("nvidia.com/gpu").text, "1");
  EXPECT_DOUBLE_EQ(back.spec.rebalancing.window.seconds, 120);
  ASSERT_TRUE(back.spec.ttl_seconds_after_finished.has_value());
  EXPECT_EQ(*back.spec.ttl_seconds_after_finished, 60);
  EXPECT_EQ(back.metadata.labels.at("team"), "x");
}

TEST(Decode, StatusDecodesFromJson) {
  nlohmann::json j = {
      {"apiVersion", "tlt.dev/v1alpha1"},
      {"kind", "RLJob"},
      {"metadata", {{"name", "a"}}},
      {"spec", nlohmann::json::object()},
      {"status",
       {{"phase", "Running"},
        {"step", 4},
        {"reward", 0.5},
        {"conditions", {{{"type", "Running"}, {"status", "True"}, {"reason", "PodsReady"}}}}}}};
  RLJob job;
  FieldErrors errors;
  decode(json_to_yaml(j), &job, &errors);
  ASSERT_TRUE(errors.empty()) << errors[0].to_string();
  EXPECT_EQ(job.status.phase, "Running");
  EXPECT_EQ(job.status.step, 4);
  ASSERT_EQ(job.status.conditions.size(), 1u);
  EXPECT_EQ(job.status.conditions[0].reason, "PodsReady");
}

TEST(YamlJson, ScalarsResolveLikeYaml12Core) {
  nlohmann::json j = yaml_to_json(YAML::Load("{a: true, b: 'true', c: 3, d: 2.5, e: ~, f: x}"));
  EXPECT_EQ(j["a"], true);
  EXPECT_EQ(j["b"], "true");
  EXPECT_EQ(j["c"], 3);
  EXPECT_EQ(j["d"], 2.5);
  EXPECT_TRUE(j["e"].is_null());
  EXPECT_EQ(j["f"], "x");
}

TEST(YamlJson, DeepNestingIsCut) {
  std::string deep(200, '[');
  deep += std::string(200, ']');
  nlohmann::json j = yaml_to_json(YAML::Load(deep));
  int depth = 0;
  const nlohmann::json* p = &j;
  while (p->is_array() && !p->empty()) {
    p = &(*p)[0];
    ++depth;
  }
  EXPECT_LE(depth, 66);
}

}  // namespace
}  // namespace tlt::api
