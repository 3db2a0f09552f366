// The admin's pod policy applied to a job author's podTemplate and to the pods made from it.
#include "operator/controller/pod_policy.h"

#include <algorithm>

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

std::string text(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string refused(const std::string& field, const std::string& what, const std::string& rule) {
  return field + ": " + what + " is refused by the operator's pod policy (rule " + rule +
         "); a cluster admin may allow it with --pod-policy-allow=" + rule;
}

bool listed(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// A non-empty string at spec[key], or "".
std::string nonempty_string(const Json& spec, const char* key) {
  auto it = spec.find(key);
  return it != spec.end() && it->is_string() ? it->get<std::string>() : "";
}

// serviceAccountName / serviceAccount: set at all (null and "" too) and not listed.
void check_service_account(const PodPolicy& policy, const Json& spec, const std::string& at,
                           std::vector<std::string>* out) {
  for (const char* field : {"serviceAccountName", "serviceAccount"}) {
    auto sa = spec.find(field);
    if (sa == spec.end()) continue;
    const std::string name = sa->is_string() ? sa->get<std::string>() : "";
    if (!name.empty() && listed(policy.service_accounts, name)) continue;
    const std::string what =
        name.empty() ? "an empty ServiceAccount (" + text(*sa) + ", the namespace's default one)"
                     : "ServiceAccount \"" + name + "\"";
    out->push_back(at + "." + field + ": " + what +
                   " is refused by the operator's pod policy (rule serviceAccount); leave it "
                   "out (the pods run as the job's own ServiceAccount)" +
                   (name.empty() ? std::string()
                                 : ", or a cluster admin may allow it with "
                                   "--pod-policy-service-account=" +
                                       name));
  }
}

// Scheduling: nodeName, priorityClassName, tolerations of the control-plane taints.
void check_scheduling(const PodPolicy& policy, const Json& spec, const std::string& at,
                      std::vector<std::string>* out) {
  if (std::string node = nonempty_string(spec, "nodeName");
      !node.empty() && !policy.allow_node_name)
    out->push_back(refused(at + ".nodeName", text(Json(node)), "nodeName"));
  if (std::string pc = nonempty_string(spec, "priorityClassName");
      !pc.empty() && !listed(policy.priority_classes, pc)) {
    out->push_back(at + ".priorityClassName: PriorityClass " + text(Json(pc)) +
                   " is refused by the operator's pod policy (rule priorityClass); a cluster "
                   "admin may allow it with --pod-policy-priority-class=" +
                   pc);
  }
  auto tolerations = spec.find("tolerations");
  if (policy.allow_control_plane_tolerations || tolerations == spec.end() ||
      !tolerations->is_array())
    return;
  for (size_t i = 0; i < tolerations->size(); ++i) {
    const Json& t = (*tolerations)[i];
    if (!t.is_object()) continue;
    const std::string key = nonempty_string(t, "key");
    const bool exists_any = key.empty() && nonempty_string(t, "operator") == "Exists";
    if (exists_any || key == "node-role.kubernetes.io/control-plane" ||
        key == "node-role.kubernetes.io/master")
      out->push_back(refused(at + ".tolerations[" + std::to_string(i) + "]",
                             exists_any ? "a toleration of every taint"
                                        : "a toleration of the control-plane taint " + key,
                             "controlPlaneTolerations"));
  }
}

}  // namespace

const std::vector<std::string>& pod_policy_rules() {
  static const std::vector<std::string> rules{"automountServiceAccountToken", "nodeName",
                                              "controlPlaneTolerations"};
  return rules;
}

Status PodPolicy::allow(const std::string& rule) {
  bool* const flags[] = {&allow_automount_token, &allow_node_name,
                         &allow_control_plane_tolerations};
  const std::vector<std::string>& names = pod_policy_rules();  // the same order
  for (size_t i = 0; i < names.size(); ++i) {
    if (rule == names[i]) {
      *flags[i] = true;
      return Status::Ok();
    }
  }
  for (const char* retired :
       {"privileged", "capabilities", "hostNetwork", "hostPID", "hostIPC", "hostPath"}) {
    if (rule == retired)
      return Status::InvalidArgument(
          "--pod-policy-allow=" + rule +
          " is retired: the Pod Security Standards level decides it (--pod-security; baseline "
          "and restricted refuse it, privileged allows it)");
  }
  std::string known;
  for (const std::string& r : pod_policy_rules()) known += (known.empty() ? "" : ", ") + r;
  return Status::InvalidArgument("--pod-policy-allow: unknown rule \"" + rule + "\"; use one of " +
                                 known);
}

std::vector<std::string> check_pod_template(const PodPolicy& policy, const Json& pod_template,
                                            const std::string& path) {
  std::vector<std::string> out;
  if (!pod_template.is_object()) return out;
  auto meta = pod_template.find("metadata");
  if (meta != pod_template.end() && meta->is_object()) {
    auto finalizers = meta->find("finalizers");
    if (finalizers != meta->end() && finalizers->is_array() && !finalizers->empty())
      out.push_back(path + ".metadata.finalizers: " + text(*finalizers) +
                    " is refused by the operator's pod policy (rule finalizers): the pods would "
                    "outlive their job");
  }
  auto spec = pod_template.find("spec");
  if (spec == pod_template.end() || !spec->is_object()) return out;
  const std::string at = path + ".spec";
  check_service_account(policy, *spec, at, &out);
  auto automount = spec->find("automountServiceAccountToken");
  if (!policy.allow_automount_token && automount != spec->end() && automount->is_boolean() &&
      automount->get<bool>())
    out.push_back(
        refused(at + ".automountServiceAccountToken", "true", "automountServiceAccountToken"));
  check_scheduling(policy, *spec, at, &out);
  return out;
}

std::vector<std::string> check_pod_security_lines(const PodPolicy& policy, const Json& pod_template,
                                                  const Json& pod, const std::string& path) {
  std::vector<std::string> out;
  for (const PodSecurityViolation& v : check_pod_security(policy.level, pod, path, &pod_template))
    out.push_back(describe(v, policy.level));
  return out;
}

}  // namespace tlt::controller
