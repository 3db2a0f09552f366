// The admin's pod policy (operator/controller/pod_policy.h) on podTemplates: each rule refused
// by default with the field named, each allowed when the admin says so, unknown rules refused.
#include <gtest/gtest.h>

#include "operator/controller/pod_policy.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

// A podTemplate that asks for everything the default policy refuses, one of each.
Json hostile_template() {
  return Json::parse(R"({"spec": {
    "hostNetwork": true, "hostPID": true, "hostIPC": true,
    "serviceAccountName": "cluster-admin-sa",
    "containers": [{"name": "tlt", "securityContext": {"privileged": true}},
                   {"name": "side", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}],
    "initContainers": [{"name": "init",
                        "securityContext": {"windowsOptions": {"hostProcess": true}}}],
    "volumes": [{"name": "data", "emptyDir": {}}, {"name": "root", "hostPath": {"path": "/"}}]}})");
}

bool has_line(const std::vector<std::string>& lines, const std::string& prefix,
              const std::string& rule) {
  for (const std::string& l : lines) {
    if (l.rfind(prefix + ": ", 0) == 0 && l.find("(rule " + rule + ")") != std::string::npos)
      return true;
  }
  return false;
}

TEST(PodPolicy, Default_EachRuleRefusedNamingFieldAndRule) {
  const std::string at = "spec.roles.rollout.podTemplate.spec";
  std::vector<std::string> v =
      check_pod_template(PodPolicy{}, hostile_template(), "spec.roles.rollout.podTemplate");
  EXPECT_EQ(v.size(), 8u);
  EXPECT_TRUE(has_line(v, at + ".containers[0].securityContext.privileged", "privileged"));
  EXPECT_TRUE(has_line(v, at + ".containers[1].securityContext.capabilities.add", "capabilities"));
  EXPECT_TRUE(has_line(v, at + ".initContainers[0].securityContext.windowsOptions.hostProcess",
                       "privileged"));
  EXPECT_TRUE(has_line(v, at + ".hostNetwork", "hostNetwork"));
  EXPECT_TRUE(has_line(v, at + ".hostPID", "hostPID"));
  EXPECT_TRUE(has_line(v, at + ".hostIPC", "hostIPC"));
  EXPECT_TRUE(has_line(v, at + ".volumes[1].hostPath", "hostPath"));
  EXPECT_TRUE(has_line(v, at + ".serviceAccountName", "serviceAccount"));
  for (const std::string& l : v) {
    EXPECT_NE(l.find("--pod-policy-"), std::string::npos) << "says how to allow it: " << l;
  }
}

TEST(PodPolicy, AdminAllowsEverything_NoViolations) {
  PodPolicy p;
  for (const std::string& rule : pod_policy_rules()) ASSERT_TRUE(p.allow(rule).ok()) << rule;
  p.service_accounts = {"cluster-admin-sa"};
  EXPECT_TRUE(check_pod_template(p, hostile_template(), "spec.workers.podTemplate").empty());
}

TEST(PodPolicy, AllowOneRule_OnlyThatOneLifted) {
  PodPolicy p;
  ASSERT_TRUE(p.allow("hostNetwork").ok());
  std::vector<std::string> v = check_pod_template(p, hostile_template(), "t");
  EXPECT_EQ(v.size(), 7u);
  EXPECT_FALSE(has_line(v, "t.spec.hostNetwork", "hostNetwork"));
}

TEST(PodPolicy, HarmlessTemplates_Allowed) {
  for (const char* t : {R"({})", R"({"spec": {}})", R"({"metadata": {"labels": {"a": "b"}}})",
                        R"({"spec": {"hostNetwork": false, "serviceAccountName": "",
                            "containers": [{"name": "tlt", "securityContext":
                              {"privileged": false, "capabilities": {"drop": ["ALL"], "add": []}}}],
                            "volumes": [{"name": "d", "emptyDir": {}}]}})"}) {
    EXPECT_TRUE(check_pod_template(PodPolicy{}, Json::parse(t), "t").empty()) << t;
  }
}

TEST(PodPolicy, UnknownRule_InvalidArgumentListingRules) {
  PodPolicy p;
  Status s = p.allow("hostnetwork");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("hostNetwork, hostPID"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tlt::controller
