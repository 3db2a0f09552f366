// The Pod Security Standards as the operator evaluates them (operator/controller/pod_security.h):
// one case per control at its level, each named with its field, in containers and init
// containers alike; the escapes of issue 41; the privileged level allows all; any JSON is
// judged without a throw. tests/operator/pss_differential.sh holds the same rules against Pod
// Security Admission on a real apiserver.
#include <gtest/gtest.h>

#include "operator/controller/pod_security.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;
constexpr PodSecurityLevel kRestricted = PodSecurityLevel::kRestricted;
constexpr PodSecurityLevel kBaseline = PodSecurityLevel::kBaseline;

// A pod that meets restricted: one container and one init container.
Json compliant() {
  Json c = {{"name", "c"},
            {"image", "x"},
            {"securityContext",
             {{"allowPrivilegeEscalation", false}, {"capabilities", {{"drop", {"ALL"}}}}}}};
  Json i = c;
  i["name"] = "i";
  return {{"metadata", Json::object()},
          {"spec",
           {{"securityContext",
             {{"runAsNonRoot", true}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
            {"containers", {c}},
            {"initContainers", {i}}}}};
}

// The fields of every violation of `pod` at `level`, in order.
std::vector<std::string> fields(PodSecurityLevel level, const Json& pod) {
  std::vector<std::string> out;
  for (const PodSecurityViolation& v : check_pod_security(level, pod, "t")) out.push_back(v.field);
  return out;
}

// `pod` with `patch` (a JSON merge patch) applied.
Json with(const char* patch) {
  Json pod = compliant();
  pod.merge_patch(Json::parse(patch));
  return pod;
}

// `pod` with one container's securityContext field set; `list` "containers" or "initContainers".
Json with_container(const std::string& list, const char* key, const Json& value) {
  Json pod = compliant();
  pod["spec"][list][0]["securityContext"][key] = value;
  return pod;
}

struct Case {
  const char* control;
  PodSecurityLevel level;  // the lowest level that refuses it
  Json pod;
  std::string field;  // under "t.spec."
};

// Refused at c.level with the first violation at c.field, every one of c.control (a pod-level
// value also leaves the containers without a valid one: those follow); refused at restricted
// too, allowed below c.level.
void expect_refused(const Case& c) {
  std::vector<PodSecurityViolation> v = check_pod_security(c.level, c.pod, "t");
  ASSERT_FALSE(v.empty()) << c.control << ": " << c.pod.dump();
  EXPECT_EQ(v[0].field, "t.spec." + c.field);
  for (const PodSecurityViolation& each : v) EXPECT_EQ(each.control, c.control) << each.field;
  if (c.level == kBaseline) {
    EXPECT_FALSE(fields(kRestricted, c.pod).empty()) << c.control;
  } else {
    EXPECT_TRUE(fields(kBaseline, c.pod).empty()) << c.control;
  }
  EXPECT_TRUE(check_pod_security(PodSecurityLevel::kPrivileged, c.pod, "t").empty());
}

TEST(PodSecurity, Compliant_AllowedAtEveryLevel) {
  EXPECT_TRUE(fields(kRestricted, compliant()).empty());
  EXPECT_TRUE(fields(kBaseline, compliant()).empty());
}

TEST(PodSecurity, BaselineControls_EachRefusedNamingField) {
  for (const std::string list : {"containers", "initContainers"}) {
    const std::string c0 = list + "[0]";
    for (const Case& c : std::vector<Case>{
             {"HostProcess", kBaseline,
              with_container(list, "windowsOptions", {{"hostProcess", true}}),
              c0 + ".securityContext.windowsOptions.hostProcess"},
             {"Privileged Containers", kBaseline, with_container(list, "privileged", true),
              c0 + ".securityContext.privileged"},
             {"SELinux", kBaseline, with_container(list, "seLinuxOptions", {{"type", "spc_t"}}),
              c0 + ".securityContext.seLinuxOptions.type"},
             {"/proc Mount Type", kBaseline, with_container(list, "procMount", "Unmasked"),
              c0 + ".securityContext.procMount"},
             {"Seccomp", kBaseline,
              with_container(list, "seccompProfile", {{"type", "Unconfined"}}),
              c0 + ".securityContext.seccompProfile.type"},
             {"AppArmor", kBaseline,
              with_container(list, "appArmorProfile", {{"type", "Unconfined"}}),
              c0 + ".securityContext.appArmorProfile.type"}}) {
      expect_refused(c);
    }
  }
}

TEST(PodSecurity, BaselinePodControls_EachRefusedNamingField) {
  for (const Case& c : std::vector<Case>{
           {"HostProcess", kBaseline,
            with(R"({"spec": {"securityContext": {"windowsOptions": {"hostProcess": true}}}})"),
            "securityContext.windowsOptions.hostProcess"},
           {"Host Namespaces", kBaseline, with(R"({"spec": {"hostNetwork": true}})"),
            "hostNetwork"},
           {"Host Namespaces", kBaseline, with(R"({"spec": {"hostPID": true}})"), "hostPID"},
           {"Host Namespaces", kBaseline, with(R"({"spec": {"hostIPC": true}})"), "hostIPC"},
           {"Sysctls", kBaseline,
            with(R"({"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem"},
                 {"name": "kernel.msgmax"}]}}})"),
            "securityContext.sysctls[1].name"},
           {"SELinux", kBaseline,
            with(R"({"spec": {"securityContext": {"seLinuxOptions": {"user": "system_u"}}}})"),
            "securityContext.seLinuxOptions.user"},
           {"Seccomp", kBaseline,
            with(R"({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}})"),
            "securityContext.seccompProfile.type"},
           {"AppArmor", kBaseline,
            with(R"({"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}})"),
            "securityContext.appArmorProfile.type"}}) {
    expect_refused(c);
  }
}

TEST(PodSecurity, AppArmorAnnotation_RefusedUnlessDefaultOrLocalhost) {
  Json pod = compliant();
  pod["metadata"]["annotations"] = {
      {"container.apparmor.security.beta.kubernetes.io/c", "unconfined"},
      {"container.apparmor.security.beta.kubernetes.io/i", "localhost/x"},
      {"other", "unconfined"}};
  std::vector<PodSecurityViolation> v = check_pod_security(kBaseline, pod, "t");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].control, "AppArmor");
  EXPECT_EQ(v[0].field,
            R"(t.metadata.annotations["container.apparmor.security.beta.kubernetes.io/c"])");
}

TEST(PodSecurity, ContainerLevelFields_Refused) {
  Json pod = compliant();
  pod["spec"]["containers"][0]["ports"] = {{{"containerPort", 80}, {"hostPort", 80}}};
  pod["spec"]["initContainers"][0]["securityContext"]["capabilities"]["add"] = {"SYS_ADMIN"};
  pod["spec"]["containers"][0]["livenessProbe"] = {
      {"httpGet", {{"host", "10.0.0.1"}, {"port", 1}}}};
  pod["spec"]["volumes"] = {{{"name", "h"}, {"hostPath", {{"path", "/"}}}}};
  std::vector<std::string> want = {
      "t.spec.initContainers[0].securityContext.capabilities.add[0]", "t.spec.volumes[0].hostPath",
      "t.spec.containers[0].ports[0].hostPort", "t.spec.containers[0].livenessProbe.httpGet.host"};
  EXPECT_EQ(fields(kBaseline, pod), want);
}

TEST(PodSecurity, RestrictedControls_EachRefusedNamingField) {
  for (const std::string list : {"containers", "initContainers"}) {
    const std::string c0 = list + "[0]";
    for (const Case& c : std::vector<Case>{
             {"Privilege Escalation", kRestricted,
              with_container(list, "allowPrivilegeEscalation", true),
              c0 + ".securityContext.allowPrivilegeEscalation"},
             {"Running as Non-root", kRestricted, with_container(list, "runAsNonRoot", false),
              c0 + ".securityContext.runAsNonRoot"},
             {"Running as Non-root user", kRestricted, with_container(list, "runAsUser", 0),
              c0 + ".securityContext.runAsUser"},
             {"Capabilities", kRestricted,
              with_container(list, "capabilities", {{"drop", {"ALL"}}, {"add", {"CHOWN"}}}),
              c0 + ".securityContext.capabilities.add[0]"},
             {"Capabilities", kRestricted,
              with_container(list, "capabilities", {{"drop", {"KILL"}}}),
              c0 + ".securityContext.capabilities.drop"}}) {
      expect_refused(c);
    }
  }
}

TEST(PodSecurity, RestrictedPodControls_EachRefusedNamingField) {
  for (
      const Case& c : std::vector<Case>{
          {"Running as Non-root user", kRestricted,
           with(R"({"spec": {"securityContext": {"runAsUser": 0}}})"), "securityContext.runAsUser"},
          {"Running as Non-root", kRestricted,
           with(R"({"spec": {"securityContext": {"runAsNonRoot": false}}})"),
           "securityContext.runAsNonRoot"},
          {"Volume Types", kRestricted,
           with(
               R"({"spec": {"volumes": [{"name": "a", "secret": {}}, {"name": "n", "nfs": {}}]}})"),
           "volumes[1].nfs"}}) {
    expect_refused(c);
  }
}

TEST(PodSecurity, EphemeralContainers_JudgedLikeTheOthers) {
  Json pod = compliant();
  pod["spec"]["ephemeralContainers"] = {
      {{"name", "debug"}, {"securityContext", {{"privileged", true}}}}};
  std::vector<std::string> want = {"t.spec.ephemeralContainers[0].securityContext.privileged"};
  EXPECT_EQ(fields(kBaseline, pod), want);
  EXPECT_EQ(fields(kRestricted, pod).size(), 3u) << "and drop ALL, allowPrivilegeEscalation";
}

TEST(PodSecurity, RestrictedUnsetFields_RefusedPerContainer) {
  Json pod = compliant();
  pod["spec"].erase("securityContext");
  pod["spec"]["initContainers"][0].erase("securityContext");
  std::vector<std::string> want = {
      "t.spec.initContainers[0].securityContext.capabilities.drop",
      "t.spec.initContainers[0].securityContext.seccompProfile.type",
      "t.spec.containers[0].securityContext.seccompProfile.type",
      "t.spec.initContainers[0].securityContext.allowPrivilegeEscalation",
      "t.spec.initContainers[0].securityContext.runAsNonRoot",
      "t.spec.containers[0].securityContext.runAsNonRoot"};
  EXPECT_EQ(fields(kRestricted, pod), want);
  EXPECT_TRUE(fields(kBaseline, pod).empty());
}

TEST(PodSecurity, UserNamespace_RelaxesRootChecksNotProcMountInRestricted) {
  Json pod = with(R"({"spec": {"hostUsers": false, "securityContext": {"runAsUser": 0,
                      "runAsNonRoot": false}}})");
  EXPECT_TRUE(fields(kRestricted, pod).empty());
  pod["spec"]["containers"][0]["securityContext"]["procMount"] = "Unmasked";
  EXPECT_TRUE(fields(kBaseline, pod).empty());
  EXPECT_EQ(fields(kRestricted, pod),
            std::vector<std::string>{"t.spec.containers[0].securityContext.procMount"});
}

TEST(PodSecurity, WindowsPod_ExemptFromLinuxOnlyRestrictedControls) {
  Json pod = compliant();
  pod["spec"]["os"] = {{"name", "windows"}};
  pod["spec"]["securityContext"].erase("seccompProfile");
  pod["spec"]["containers"][0].erase("securityContext");
  EXPECT_TRUE(fields(kRestricted, pod).empty());
}

TEST(PodSecurity, VolumeWithoutSource_IsAnEmptyDirAndAllowed) {
  EXPECT_TRUE(fields(kRestricted, with(R"({"spec": {"volumes": [{"name": "a"},
      {"name": "b", "hostPath": null}]}})"))
                  .empty());
}

TEST(PodSecurity, NullIsAbsent_WrongTypesNeverThrow) {
  EXPECT_TRUE(fields(kBaseline, with(R"({"spec": {"hostNetwork": null, "securityContext":
      {"seccompProfile": null, "sysctls": null}}})"))
                  .empty());
  const Json written = compliant();
  for (const char* t :
       {"null", "1", "[]", R"({"spec": []})", R"({"spec": {"containers": [1, null, "x"]}})",
        R"({"spec": {"containers": {"a": 1}, "volumes": [1, [], {"name": 2}]}})",
        R"({"metadata": {"annotations": [1]}, "spec": {"securityContext": {"sysctls": [1]}}})",
        R"({"spec": {"containers": [{"securityContext": {"capabilities": {"add": [1, null]},
             "runAsUser": "0", "seLinuxOptions": {"type": 3}}, "ports": [{"hostPort": "80"}]}]}})"}) {
    EXPECT_NO_THROW(check_pod_security(kRestricted, Json::parse(t), "t")) << t;
    EXPECT_NO_THROW(check_pod_security(kRestricted, Json::parse(t), "t", &written)) << t;
  }
}

TEST(PodSecurity, ParseLevel_KnownNamesOnly) {
  EXPECT_EQ(*parse_pod_security_level("baseline"), kBaseline);
  EXPECT_EQ(parse_pod_security_level("Restricted").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tlt::controller
