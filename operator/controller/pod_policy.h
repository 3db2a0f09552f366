// The cluster admin's pod policy: what a job author's podTemplate may ask of the pods that the
// operator creates with its own rights. The right to create a job is the right to create pods
// within this policy, and no more (as with Kubeflow's and KubeRay's operators).
//
// By default a podTemplate is refused when any container (containers, initContainers,
// ephemeralContainers) sets securityContext.privileged or windowsOptions.hostProcess (rule
// "privileged") or adds capabilities (rule "capabilities"), or the pod spec sets hostNetwork,
// hostPID or hostIPC (rules of those names), mounts a hostPath volume (rule "hostPath"), or names
// a serviceAccountName (or the deprecated serviceAccount) that is not in the admin's list (rule
// "serviceAccount"). The admin allows a rule with --pod-policy-allow=RULE (Helm:
// podPolicy.allow) and a ServiceAccount with --pod-policy-service-account=NAME (Helm:
// podPolicy.serviceAccounts).
//
// Thread safety: plain values and stateless functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::controller {

struct PodPolicy {
  bool allow_privileged = false;    // "privileged": privileged or hostProcess containers
  bool allow_capabilities = false;  // "capabilities": securityContext.capabilities.add
  bool allow_host_network = false;  // "hostNetwork"
  bool allow_host_pid = false;      // "hostPID"
  bool allow_host_ipc = false;      // "hostIPC"
  bool allow_host_path = false;     // "hostPath": volumes[].hostPath
  // ServiceAccounts a podTemplate may name, e.g. {"trainer-reader"}; an empty or absent
  // serviceAccountName is always allowed (the pods then run as the namespace's default one).
  std::vector<std::string> service_accounts;

  // Allows `rule` (one of the rule names above). InvalidArgument naming the known rules
  // otherwise.
  Status allow(const std::string& rule);
};

// The rule names --pod-policy-allow accepts, in a fixed order.
const std::vector<std::string>& pod_policy_rules();

// Every way `pod_template` (a PodTemplateSpec as the job author wrote it, found at `path` in the
// job, e.g. "spec.roles.rollout.podTemplate") breaks `policy`, one line each:
//   "spec.roles.rollout.podTemplate.spec.hostNetwork: true is refused by the operator's pod
//    policy (rule hostNetwork); a cluster admin may allow it with --pod-policy-allow=hostNetwork"
// Empty when the template is allowed. Fields of the wrong JSON type are skipped here; the
// reconciler refuses them first (pod_template.h).
std::vector<std::string> check_pod_template(const PodPolicy& policy,
                                            const nlohmann::json& pod_template,
                                            const std::string& path);

}  // namespace tlt::controller
