// The admin rules of the pod policy (operator/controller/pod_policy.h) on podTemplates: each rule
// refused by default with the field named, each allowed when the admin says so, an empty or null
// serviceAccountName refused like any unlisted one, retired and unknown rules refused.
#include <gtest/gtest.h>

#include "operator/controller/pod_policy.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

// A podTemplate that asks for everything the admin rules refuse, one of each.
Json hostile_template() {
  return Json::parse(R"({"metadata": {"finalizers": ["example.com/keep"]}, "spec": {
    "serviceAccountName": "cluster-admin-sa", "automountServiceAccountToken": true,
    "nodeName": "cp-0", "priorityClassName": "system-node-critical",
    "tolerations": [{"key": "gpu", "operator": "Exists"},
                    {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
                    {"operator": "Exists"},
                    {"key": "node-role.kubernetes.io/master", "operator": "Equal"}],
    "containers": [{"name": "tlt"}]}})");
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
  EXPECT_TRUE(has_line(v, "spec.roles.rollout.podTemplate.metadata.finalizers", "finalizers"));
  EXPECT_TRUE(has_line(v, at + ".serviceAccountName", "serviceAccount"));
  EXPECT_TRUE(has_line(v, at + ".automountServiceAccountToken", "automountServiceAccountToken"));
  EXPECT_TRUE(has_line(v, at + ".nodeName", "nodeName"));
  EXPECT_TRUE(has_line(v, at + ".priorityClassName", "priorityClass"));
  EXPECT_FALSE(has_line(v, at + ".tolerations[0]", "controlPlaneTolerations")) << "gpu: allowed";
  EXPECT_TRUE(has_line(v, at + ".tolerations[1]", "controlPlaneTolerations"));
  EXPECT_TRUE(has_line(v, at + ".tolerations[2]", "controlPlaneTolerations"));
  EXPECT_TRUE(has_line(v, at + ".tolerations[3]", "controlPlaneTolerations"));
}

TEST(PodPolicy, EmptyOrNullServiceAccountName_RefusedLikeDefault) {
  for (const char* t :
       {R"({"spec": {"serviceAccountName": ""}})", R"({"spec": {"serviceAccountName": null}})",
        R"({"spec": {"serviceAccount": ""}})", R"({"spec": {"serviceAccountName": "default"}})"}) {
    std::vector<std::string> v = check_pod_template(PodPolicy{}, Json::parse(t), "t");
    ASSERT_EQ(v.size(), 1u) << t;
    EXPECT_NE(v[0].find("(rule serviceAccount)"), std::string::npos) << v[0];
  }
}

TEST(PodPolicy, AdminAllowsEverything_OnlyFinalizersRemain) {
  PodPolicy p;
  for (const std::string& rule : pod_policy_rules()) ASSERT_TRUE(p.allow(rule).ok()) << rule;
  p.service_accounts = {"cluster-admin-sa"};
  p.priority_classes = {"system-node-critical"};
  std::vector<std::string> v = check_pod_template(p, hostile_template(), "t");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(has_line(v, "t.metadata.finalizers", "finalizers")) << v[0];
}

TEST(PodPolicy, AllowOneRule_OnlyThatOneLifted) {
  PodPolicy p;
  ASSERT_TRUE(p.allow("nodeName").ok());
  std::vector<std::string> v = check_pod_template(p, hostile_template(), "t");
  EXPECT_EQ(v.size(), 7u);
  EXPECT_FALSE(has_line(v, "t.spec.nodeName", "nodeName"));
}

TEST(PodPolicy, HarmlessTemplates_Allowed) {
  for (const char* t : {R"({})", R"({"spec": {}})", R"({"metadata": {"labels": {"a": "b"}}})",
                        R"({"metadata": {"finalizers": []}, "spec": {
                            "automountServiceAccountToken": false, "nodeName": "",
                            "priorityClassName": "", "tolerations": [{"key": "gpu"}],
                            "containers": [{"name": "tlt"}]}})"}) {
    EXPECT_TRUE(check_pod_template(PodPolicy{}, Json::parse(t), "t").empty()) << t;
  }
}

TEST(PodPolicy, RetiredRule_InvalidArgumentNamingPodSecurity) {
  for (const char* rule :
       {"privileged", "capabilities", "hostNetwork", "hostPID", "hostIPC", "hostPath"}) {
    PodPolicy p;
    Status s = p.allow(rule);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << rule;
    EXPECT_NE(s.message().find("--pod-security"), std::string::npos) << s.message();
  }
}

TEST(PodPolicy, UnknownRule_InvalidArgumentListingRules) {
  PodPolicy p;
  Status s = p.allow("nodename");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("automountServiceAccountToken, nodeName, controlPlaneTolerations"),
            std::string::npos)
      << s.message();
}

TEST(PodPolicy, PodSecurityLines_NameTheTemplatesContainerAndControl) {
  // The pod puts the operator's container first; the template's sidecar is containers[0] there.
  Json tmpl = Json::parse(R"({"spec": {"containers": [{"name": "side",
      "securityContext": {"allowPrivilegeEscalation": true}}]}})");
  Json pod = Json::parse(R"({"spec": {"securityContext": {"runAsNonRoot": true,
      "seccompProfile": {"type": "RuntimeDefault"}},
      "containers": [{"name": "tlt", "securityContext": {"allowPrivilegeEscalation": false,
                      "capabilities": {"drop": ["ALL"]}}},
                     {"name": "side", "securityContext": {"allowPrivilegeEscalation": true,
                      "capabilities": {"drop": ["ALL"]}}}]}})");
  std::vector<std::string> v =
      check_pod_security_lines(PodPolicy{}, tmpl, pod, "spec.workers.podTemplate");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0],
            "spec.workers.podTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation: "
            "must be false (is true) (Pod Security Standard restricted, control \"Privilege "
            "Escalation\")");
}

}  // namespace
}  // namespace tlt::controller
