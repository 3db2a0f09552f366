// The cluster admin's pod policy: what a job author's podTemplate may ask of the pods that the
// operator creates with its own rights. The right to create a job is the right to create pods
// within this policy, and no more.
//
// Two parts, both checked before any pod of the job is created:
//   - a Pod Security Standards level (pod_security.h; --pod-security, Helm podSecurity.level,
//     default restricted), held by the whole pod the operator would create (the template merged
//     with the operator's own container, volumes and defaults, desired.h);
//   - admin rules on what PSS does not cover (identity, scheduling, lifecycle), each refused by
//     default and named on the template:
//       rule "serviceAccount"    spec.serviceAccountName or the deprecated spec.serviceAccount
//                                set at all (an empty name and null included: the pod would run
//                                as the namespace's default ServiceAccount) to a name not in
//                                --pod-policy-service-account. Absent, the pod runs as the job's
//                                own ServiceAccount (desired.h).
//       rule "automountServiceAccountToken"  spec.automountServiceAccountToken true
//                                (--pod-policy-allow=automountServiceAccountToken); false is
//                                always allowed.
//       rule "nodeName"          a non-empty spec.nodeName (--pod-policy-allow=nodeName)
//       rule "priorityClass"     a non-empty spec.priorityClassName not in
//                                --pod-policy-priority-class
//       rule "controlPlaneTolerations"  a toleration of the control-plane taints: key
//                                node-role.kubernetes.io/control-plane or
//                                node-role.kubernetes.io/master, or operator Exists with no key
//                                (--pod-policy-allow=controlPlaneTolerations)
//       rule "finalizers"        a non-empty metadata.finalizers (never allowed: the pods would
//                                outlive their job)
// privileged, capabilities, hostNetwork, hostPID, hostIPC and hostPath are not admin rules: the
// PSS level decides them (baseline and restricted refuse each; privileged allows them), and
// allow() refuses those names saying so.
//
// Thread safety: plain values and stateless functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "operator/controller/pod_security.h"

namespace tlt::controller {

struct PodPolicy {
  PodSecurityLevel level = PodSecurityLevel::kRestricted;  // --pod-security
  bool allow_automount_token = false;                      // "automountServiceAccountToken"
  bool allow_node_name = false;                            // "nodeName"
  bool allow_control_plane_tolerations = false;            // "controlPlaneTolerations"
  // ServiceAccounts a podTemplate may name, e.g. {"trainer-reader"}.
  std::vector<std::string> service_accounts;
  // PriorityClasses a podTemplate may name in priorityClassName.
  std::vector<std::string> priority_classes;

  // Allows `rule` (automountServiceAccountToken, nodeName, controlPlaneTolerations).
  // InvalidArgument naming the known rules otherwise; for a retired rule, naming the
  // --pod-security level that allows it.
  Status allow(const std::string& rule);
};

// The rule names --pod-policy-allow accepts, in a fixed order.
const std::vector<std::string>& pod_policy_rules();

// Every way `pod_template` (a PodTemplateSpec as the job author wrote it, found at `path` in the
// job, e.g. "spec.roles.rollout.podTemplate") breaks the admin rules of `policy`, one line each:
//   "spec.roles.rollout.podTemplate.spec.nodeName: \"cp-0\" is refused by the operator's pod
//    policy (rule nodeName); a cluster admin may allow it with --pod-policy-allow=nodeName"
// Empty when the template is allowed. Fields of the wrong JSON type are skipped here; the
// reconciler refuses them first (pod_template.h).
std::vector<std::string> check_pod_template(const PodPolicy& policy,
                                            const nlohmann::json& pod_template,
                                            const std::string& path);

// Every violation of the policy's PSS level by `pod` (a pod the operator would create, built from
// `pod_template` found at `path`), one line each, the field named in the template
// (pod_security.h): "spec.roles.rollout.podTemplate.spec.containers[1].securityContext
// .allowPrivilegeEscalation: must be false (is true) (Pod Security Standard restricted, control
// \"Privilege Escalation\")". Empty when the pod meets the level.
std::vector<std::string> check_pod_security_lines(const PodPolicy& policy,
                                                  const nlohmann::json& pod_template,
                                                  const nlohmann::json& pod,
                                                  const std::string& path);

}  // namespace tlt::controller
