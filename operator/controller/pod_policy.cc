// The admin's pod policy applied to a job author's podTemplate.
#include "operator/controller/pod_policy.h"

#include <algorithm>

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

std::string refused(const std::string& field, const std::string& what, const std::string& rule) {
  return field + ": " + what + " is refused by the operator's pod policy (rule " + rule +
         "); a cluster admin may allow it with --pod-policy-allow=" + rule;
}

bool is_true(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

void check_containers(const PodPolicy& policy, const Json& spec, const std::string& at,
                      std::vector<std::string>* out) {
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    auto l = spec.find(list);
    if (l == spec.end() || !l->is_array()) continue;
    for (size_t i = 0; i < l->size(); ++i) {
      const Json& c = (*l)[i];
      if (!c.is_object() || !c.contains("securityContext") || !c["securityContext"].is_object())
        continue;
      const Json& sc = c["securityContext"];
      std::string field = at + "." + list + "[" + std::to_string(i) + "].securityContext";
      if (!policy.allow_privileged && is_true(sc, "privileged"))
        out->push_back(refused(field + ".privileged", "true", "privileged"));
      if (!policy.allow_privileged && sc.contains("windowsOptions") &&
          sc["windowsOptions"].is_object() && is_true(sc["windowsOptions"], "hostProcess"))
        out->push_back(refused(field + ".windowsOptions.hostProcess", "true", "privileged"));
      if (!policy.allow_capabilities && sc.contains("capabilities") &&
          sc["capabilities"].is_object()) {
        const Json& add = sc["capabilities"].value("add", Json::array());
        if (add.is_array() && !add.empty())
          out->push_back(
              refused(field + ".capabilities.add",
                      "adding " + add.dump(-1, ' ', false, Json::error_handler_t::replace),
                      "capabilities"));
      }
    }
  }
}

}  // namespace

const std::vector<std::string>& pod_policy_rules() {
  static const std::vector<std::string> rules{"privileged", "capabilities", "hostNetwork",
                                              "hostPID",    "hostIPC",      "hostPath"};
  return rules;
}

Status PodPolicy::allow(const std::string& rule) {
  bool* const flags[] = {&allow_privileged, &allow_capabilities, &allow_host_network,
                         &allow_host_pid,   &allow_host_ipc,     &allow_host_path};
  const std::vector<std::string>& names = pod_policy_rules();  // the same order
  for (size_t i = 0; i < names.size(); ++i) {
    if (rule == names[i]) {
      *flags[i] = true;
      return Status::Ok();
    }
  }
  std::string known;
  for (const std::string& r : pod_policy_rules()) known += (known.empty() ? "" : ", ") + r;
  return Status::InvalidArgument("--pod-policy-allow: unknown rule \"" + rule + "\"; use one of " +
                                 known);
}

std::vector<std::string> check_pod_template(const PodPolicy& policy, const Json& pod_template,
                                            const std::string& path) {
  std::vector<std::string> out;
  if (!pod_template.is_object() || !pod_template.contains("spec") ||
      !pod_template["spec"].is_object())
    return out;
  const Json& spec = pod_template["spec"];
  const std::string at = path + ".spec";
  check_containers(policy, spec, at, &out);
  const std::pair<const char*, bool> host[] = {{"hostNetwork", policy.allow_host_network},
                                               {"hostPID", policy.allow_host_pid},
                                               {"hostIPC", policy.allow_host_ipc}};
  for (const auto& [field, allowed] : host) {
    if (!allowed && is_true(spec, field)) out.push_back(refused(at + "." + field, "true", field));
  }
  auto volumes = spec.find("volumes");
  if (!policy.allow_host_path && volumes != spec.end() && volumes->is_array()) {
    for (size_t i = 0; i < volumes->size(); ++i) {
      const Json& v = (*volumes)[i];
      if (v.is_object() && v.contains("hostPath"))
        out.push_back(refused(at + ".volumes[" + std::to_string(i) + "].hostPath",
                              "a hostPath volume", "hostPath"));
    }
  }
  for (const char* field : {"serviceAccountName", "serviceAccount"}) {
    auto sa = spec.find(field);
    if (sa == spec.end() || !sa->is_string() || sa->get<std::string>().empty()) continue;
    const std::string name = sa->get<std::string>();
    const auto& allowed = policy.service_accounts;
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    out.push_back(at + "." + field + ": ServiceAccount \"" + name +
                  "\" is refused by the operator's pod policy (rule serviceAccount); leave it "
                  "empty, or a cluster admin may allow it with --pod-policy-service-account=" +
                  name);
  }
  return out;
}

}  // namespace tlt::controller
