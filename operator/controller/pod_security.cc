// The Pod Security Standards' controls on a pod, as Pod Security Admission (v0.36) evaluates them.
#include "operator/controller/pod_security.h"

#include <algorithm>
#include <optional>
#include <set>

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

// ---- type-checked reads: absent, null and a wrong JSON type all read as absent ----------------

const Json* member_of(const Json* object, const char* key, Json::value_t type) {
  if (object == nullptr || !object->is_object()) return nullptr;
  auto it = object->find(key);
  if (it == object->end() || it->type() != type) return nullptr;
  return &*it;
}

const Json* object_at(const Json* o, const char* key) {
  return member_of(o, key, Json::value_t::object);
}

const Json* array_at(const Json* o, const char* key) {
  return member_of(o, key, Json::value_t::array);
}

std::optional<bool> bool_at(const Json* o, const char* key) {
  const Json* v = member_of(o, key, Json::value_t::boolean);
  if (v == nullptr) return std::nullopt;
  return v->get<bool>();
}

std::optional<std::string> string_at(const Json* o, const char* key) {
  const Json* v = member_of(o, key, Json::value_t::string);
  if (v == nullptr) return std::nullopt;
  return v->get<std::string>();
}

// A number of any JSON number type (0, 0.0 and -0 are all zero to the apiserver).
std::optional<double> number_at(const Json* o, const char* key) {
  if (o == nullptr || !o->is_object()) return std::nullopt;
  auto it = o->find(key);
  if (it == o->end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string text(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string json_string(const std::string& s) {
  return text(Json(s));
}

// ---- the pod as the checks see it --------------------------------------------------------------

struct Container {
  const Json* json;  // the container (an object)
  std::string path;  // e.g. "spec.roles.rollout.podTemplate.spec.initContainers[0]"
  const Json* sc;    // its securityContext, or nullptr
};

struct PodView {
  const Json* meta = nullptr;  // metadata, or nullptr
  const Json* spec = nullptr;  // spec, or nullptr
  const Json* sc = nullptr;    // spec.securityContext, or nullptr
  std::string at;              // the path of spec
  std::vector<Container> containers;
  bool user_namespace = false;  // spec.hostUsers is false
  bool windows = false;         // spec.os.name is "windows"
};

std::string name_of(const Json& c) {
  return string_at(&c, "name").value_or("");
}

// The path of pod_list[i] (of list `list`): its index in `written` (the author's list) when
// given, matched by name and occurrence; its own index otherwise.
std::string container_path(const std::string& at, const char* list, const Json& pod_list, size_t i,
                           const Json* written) {
  std::string own = at + "." + list + "[" + std::to_string(i) + "]";
  if (written == nullptr) return own;
  const std::string name = name_of(pod_list[i]);
  size_t occurrence = 0;
  for (size_t k = 0; k < i; ++k) {
    if (pod_list[k].is_object() && name_of(pod_list[k]) == name) ++occurrence;
  }
  const Json* theirs = array_at(object_at(written, "spec"), list);
  if (theirs != nullptr) {
    for (size_t j = 0; j < theirs->size(); ++j) {
      const Json& c = (*theirs)[j];
      if (!c.is_object() || name_of(c) != name) continue;
      if (occurrence-- == 0) return at + "." + list + "[" + std::to_string(j) + "]";
    }
  }
  return at + "." + list + "[name=" + name + "]";
}

PodView view_of(const Json& pod, const std::string& path, const Json* written) {
  PodView p;
  p.meta = object_at(&pod, "metadata");
  p.spec = object_at(&pod, "spec");
  p.sc = object_at(p.spec, "securityContext");
  p.at = path.empty() ? "spec" : path + ".spec";
  p.user_namespace = bool_at(p.spec, "hostUsers") == std::optional<bool>(false);
  p.windows = string_at(object_at(p.spec, "os"), "name") == std::optional<std::string>("windows");
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    const Json* l = array_at(p.spec, list);
    if (l == nullptr) continue;
    for (size_t i = 0; i < l->size(); ++i) {
      const Json& c = (*l)[i];
      if (!c.is_object()) continue;
      p.containers.push_back(
          {&c, container_path(p.at, list, *l, i, written), object_at(&c, "securityContext")});
    }
  }
  return p;
}

using Out = std::vector<PodSecurityViolation>;

void add(Out* out, const char* control, const std::string& field, const std::string& detail) {
  out->push_back({control, field, detail});
}

// ---- baseline ----------------------------------------------------------------------------------

void host_process(const PodView& p, Out* out) {
  const char* k = "HostProcess";
  if (bool_at(object_at(p.sc, "windowsOptions"), "hostProcess") == std::optional<bool>(true))
    add(out, k, p.at + ".securityContext.windowsOptions.hostProcess", "must not be true");
  for (const Container& c : p.containers) {
    if (bool_at(object_at(c.sc, "windowsOptions"), "hostProcess") == std::optional<bool>(true))
      add(out, k, c.path + ".securityContext.windowsOptions.hostProcess", "must not be true");
  }
}

void host_namespaces(const PodView& p, Out* out) {
  for (const char* field : {"hostNetwork", "hostPID", "hostIPC"}) {
    if (bool_at(p.spec, field) == std::optional<bool>(true))
      add(out, "Host Namespaces", p.at + "." + field, "must not be true");
  }
}

void privileged(const PodView& p, Out* out) {
  for (const Container& c : p.containers) {
    if (bool_at(c.sc, "privileged") == std::optional<bool>(true))
      add(out, "Privileged Containers", c.path + ".securityContext.privileged", "must not be true");
  }
}

void capabilities_baseline(const PodView& p, Out* out) {
  static const std::set<std::string> allowed{
      "AUDIT_WRITE",      "CHOWN",   "DAC_OVERRIDE", "FOWNER",  "FSETID", "KILL",      "MKNOD",
      "NET_BIND_SERVICE", "SETFCAP", "SETGID",       "SETPCAP", "SETUID", "SYS_CHROOT"};
  for (const Container& c : p.containers) {
    const Json* add_list = array_at(object_at(c.sc, "capabilities"), "add");
    if (add_list == nullptr) continue;
    for (size_t i = 0; i < add_list->size(); ++i) {
      const Json& cap = (*add_list)[i];
      if (cap.is_string() && allowed.count(cap.get<std::string>())) continue;
      add(out, "Capabilities",
          c.path + ".securityContext.capabilities.add[" + std::to_string(i) + "]",
          "must not add " + text(cap) + " (beyond the default set)");
    }
  }
}

void host_path_volumes(const PodView& p, Out* out) {
  const Json* volumes = array_at(p.spec, "volumes");
  if (volumes == nullptr) return;
  for (size_t i = 0; i < volumes->size(); ++i) {
    if (object_at(&(*volumes)[i], "hostPath") != nullptr)
      add(out, "HostPath Volumes", p.at + ".volumes[" + std::to_string(i) + "].hostPath",
          "must not be set");
  }
}

void host_ports(const PodView& p, Out* out) {
  for (const Container& c : p.containers) {
    const Json* ports = array_at(c.json, "ports");
    if (ports == nullptr) continue;
    for (size_t i = 0; i < ports->size(); ++i) {
      std::optional<double> port = number_at(&(*ports)[i], "hostPort");
      if (port && *port != 0)
        add(out, "Host Ports", c.path + ".ports[" + std::to_string(i) + "].hostPort",
            "must be 0 or unset (is " + text((*ports)[i]["hostPort"]) + ")");
    }
  }
}

// `handler` (a probe or a lifecycle handler at `at`): a non-empty httpGet.host or tcpSocket.host.
void probe_hosts(const Json* handler, const std::string& at, Out* out) {
  for (const char* kind : {"httpGet", "tcpSocket"}) {
    std::optional<std::string> host = string_at(object_at(handler, kind), "host");
    if (host && !host->empty())
      add(out, "Host Probes / Lifecycle Hooks", at + "." + kind + ".host",
          "must be empty (is " + json_string(*host) + ")");
  }
}

void host_probes(const PodView& p, Out* out) {
  for (const Container& c : p.containers) {
    for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"})
      probe_hosts(object_at(c.json, probe), c.path + "." + probe, out);
    const Json* lifecycle = object_at(c.json, "lifecycle");
    for (const char* hook : {"postStart", "preStop"})
      probe_hosts(object_at(lifecycle, hook), c.path + ".lifecycle." + hook, out);
  }
}

// A securityContext's profile object `key` (appArmorProfile, seccompProfile) at `at`: its type
// must be RuntimeDefault or Localhost. Returns whether it is set (valid or not).
bool profile_type(const Json* sc, const char* key, const std::string& at, const char* control,
                  Out* out) {
  const Json* profile = object_at(sc, key);
  if (profile == nullptr) return false;
  std::string type = string_at(profile, "type").value_or("");
  if (type != "RuntimeDefault" && type != "Localhost")
    add(out, control, at + ".securityContext." + key + ".type",
        "must be RuntimeDefault or Localhost (is " + json_string(type) + ")");
  return true;
}

void app_armor(const PodView& p, Out* out) {
  const char* k = "AppArmor";
  profile_type(p.sc, "appArmorProfile", p.at, k, out);
  for (const Container& c : p.containers) profile_type(c.sc, "appArmorProfile", c.path, k, out);
  const Json* annotations = object_at(p.meta, "annotations");
  if (annotations == nullptr) return;
  const std::string prefix = "container.apparmor.security.beta.kubernetes.io/";
  const std::string meta_at = p.at.substr(0, p.at.size() - 4) + "metadata.annotations";
  for (const auto& [key, value] : annotations->items()) {
    if (key.rfind(prefix, 0) != 0 || !value.is_string()) continue;
    const std::string v = value.get<std::string>();
    if (v.empty() || v == "runtime/default" || v.rfind("localhost/", 0) == 0) continue;
    add(out, k, meta_at + "[" + json_string(key) + "]",
        "must be runtime/default or localhost/* (is " + json_string(v) + ")");
  }
}

void se_linux_options(const Json* sc, const std::string& at, Out* out) {
  static const std::set<std::string> types{"", "container_t", "container_init_t", "container_kvm_t",
                                           "container_engine_t"};
  const Json* o = object_at(sc, "seLinuxOptions");
  if (o == nullptr) return;
  const std::string field = at + ".securityContext.seLinuxOptions.";
  std::string type = string_at(o, "type").value_or("");
  if (!types.count(type))
    add(out, "SELinux", field + "type",
        "must be empty, container_t, container_init_t, container_kvm_t or container_engine_t "
        "(is " +
            json_string(type) + ")");
  for (const char* key : {"user", "role"}) {
    if (!string_at(o, key).value_or("").empty())
      add(out, "SELinux", field + key, "must not be set");
  }
}

void se_linux(const PodView& p, Out* out) {
  se_linux_options(p.sc, p.at, out);
  for (const Container& c : p.containers) se_linux_options(c.sc, c.path, out);
}

// /proc Mount Type; `relaxed`: baseline's form, which allows any value in a user namespace.
void proc_mount(const PodView& p, bool relaxed, Out* out) {
  if (relaxed && p.user_namespace) return;
  for (const Container& c : p.containers) {
    std::optional<std::string> mount = string_at(c.sc, "procMount");
    if (mount && *mount != "Default")
      add(out, "/proc Mount Type", c.path + ".securityContext.procMount",
          "must be Default or unset (is " + json_string(*mount) + ")");
  }
}

void seccomp_baseline(const PodView& p, Out* out) {
  profile_type(p.sc, "seccompProfile", p.at, "Seccomp", out);
  for (const Container& c : p.containers)
    profile_type(c.sc, "seccompProfile", c.path, "Seccomp", out);
}

void sysctls(const PodView& p, Out* out) {
  static const std::set<std::string> safe{"kernel.shm_rmid_forced",
                                          "net.ipv4.ip_local_port_range",
                                          "net.ipv4.tcp_syncookies",
                                          "net.ipv4.ping_group_range",
                                          "net.ipv4.ip_unprivileged_port_start",
                                          "net.ipv4.ip_local_reserved_ports",
                                          "net.ipv4.tcp_keepalive_time",
                                          "net.ipv4.tcp_fin_timeout",
                                          "net.ipv4.tcp_keepalive_intvl",
                                          "net.ipv4.tcp_keepalive_probes",
                                          "net.ipv4.tcp_rmem",
                                          "net.ipv4.tcp_wmem"};
  const Json* list = array_at(p.sc, "sysctls");
  if (list == nullptr) return;
  for (size_t i = 0; i < list->size(); ++i) {
    std::string name = string_at(&(*list)[i], "name").value_or("");
    if (!safe.count(name))
      add(out, "Sysctls", p.at + ".securityContext.sysctls[" + std::to_string(i) + "].name",
          "must be a safe sysctl (is " + json_string(name) + ")");
  }
}

// ---- restricted --------------------------------------------------------------------------------

// The apiserver makes a volume with no source an emptyDir, so only a source outside the list
// breaks the control.
void volume_types(const PodView& p, Out* out) {
  static const char* const allowed[] = {"configMap", "csi",   "downwardAPI",           "emptyDir",
                                        "ephemeral", "image", "persistentVolumeClaim", "projected",
                                        "secret"};
  static const char* const refused[] = {"hostPath",
                                        "gcePersistentDisk",
                                        "awsElasticBlockStore",
                                        "gitRepo",
                                        "nfs",
                                        "iscsi",
                                        "glusterfs",
                                        "rbd",
                                        "flexVolume",
                                        "cinder",
                                        "cephfs",
                                        "flocker",
                                        "fc",
                                        "azureFile",
                                        "vsphereVolume",
                                        "quobyte",
                                        "azureDisk",
                                        "photonPersistentDisk",
                                        "portworxVolume",
                                        "scaleIO",
                                        "storageos"};
  const Json* volumes = array_at(p.spec, "volumes");
  if (volumes == nullptr) return;
  for (size_t i = 0; i < volumes->size(); ++i) {
    const Json& v = (*volumes)[i];
    auto has = [&](const char* type) { return object_at(&v, type) != nullptr; };
    if (std::any_of(std::begin(allowed), std::end(allowed), has)) continue;
    for (const char* type : refused) {
      if (!has(type)) continue;
      add(out, "Volume Types", p.at + ".volumes[" + std::to_string(i) + "]." + type,
          "must be configMap, csi, downwardAPI, emptyDir, ephemeral, image, "
          "persistentVolumeClaim, projected or secret");
      break;
    }
  }
}

void privilege_escalation(const PodView& p, Out* out) {
  if (p.windows) return;
  for (const Container& c : p.containers) {
    std::optional<bool> v = bool_at(c.sc, "allowPrivilegeEscalation");
    if (v != std::optional<bool>(false))
      add(out, "Privilege Escalation", c.path + ".securityContext.allowPrivilegeEscalation",
          v ? "must be false (is true)" : "must be false (unset)");
  }
}

void run_as_non_root(const PodView& p, Out* out) {
  if (p.user_namespace) return;
  const char* k = "Running as Non-root";
  std::optional<bool> pod = bool_at(p.sc, "runAsNonRoot");
  if (pod == std::optional<bool>(false))
    add(out, k, p.at + ".securityContext.runAsNonRoot", "must be true (is false)");
  for (const Container& c : p.containers) {
    std::optional<bool> v = bool_at(c.sc, "runAsNonRoot");
    if (v == std::optional<bool>(false))
      add(out, k, c.path + ".securityContext.runAsNonRoot", "must be true (is false)");
    else if (!v && pod != std::optional<bool>(true))
      add(out, k, c.path + ".securityContext.runAsNonRoot",
          "must be true, here or in the pod's securityContext (unset)");
  }
}

void run_as_user(const PodView& p, Out* out) {
  if (p.user_namespace) return;
  const char* k = "Running as Non-root user";
  if (number_at(p.sc, "runAsUser") == std::optional<double>(0))
    add(out, k, p.at + ".securityContext.runAsUser", "must not be 0");
  for (const Container& c : p.containers) {
    if (number_at(c.sc, "runAsUser") == std::optional<double>(0))
      add(out, k, c.path + ".securityContext.runAsUser", "must not be 0");
  }
}

bool valid_seccomp(const Json* sc) {
  std::string type = string_at(object_at(sc, "seccompProfile"), "type").value_or("");
  return type == "RuntimeDefault" || type == "Localhost";
}

void seccomp_restricted(const PodView& p, Out* out) {
  if (p.windows) return;
  seccomp_baseline(p, out);
  const bool pod_set = valid_seccomp(p.sc);
  for (const Container& c : p.containers) {
    if (object_at(c.sc, "seccompProfile") == nullptr && !pod_set)
      add(out, "Seccomp", c.path + ".securityContext.seccompProfile.type",
          "must be RuntimeDefault or Localhost, here or in the pod's securityContext (unset)");
  }
}

void capabilities_restricted(const PodView& p, Out* out) {
  if (p.windows) return;
  for (const Container& c : p.containers) {
    const Json* caps = object_at(c.sc, "capabilities");
    const Json* drop = array_at(caps, "drop");
    bool drops_all =
        drop != nullptr && std::find(drop->begin(), drop->end(), Json("ALL")) != drop->end();
    if (!drops_all)
      add(out, "Capabilities", c.path + ".securityContext.capabilities.drop",
          "must include \"ALL\"");
    const Json* add_list = array_at(caps, "add");
    if (add_list == nullptr) continue;
    for (size_t i = 0; i < add_list->size(); ++i) {
      if ((*add_list)[i] == Json("NET_BIND_SERVICE")) continue;
      add(out, "Capabilities",
          c.path + ".securityContext.capabilities.add[" + std::to_string(i) + "]",
          "must not add " + text((*add_list)[i]) + " (only NET_BIND_SERVICE)");
    }
  }
}

}  // namespace

StatusOr<PodSecurityLevel> parse_pod_security_level(const std::string& name) {
  if (name == "privileged") return PodSecurityLevel::kPrivileged;
  if (name == "baseline") return PodSecurityLevel::kBaseline;
  if (name == "restricted") return PodSecurityLevel::kRestricted;
  return Status::InvalidArgument("unknown Pod Security Standard level \"" + name +
                                 "\"; use privileged, baseline or restricted");
}

const char* pod_security_level_name(PodSecurityLevel level) {
  switch (level) {
    case PodSecurityLevel::kPrivileged:
      return "privileged";
    case PodSecurityLevel::kBaseline:
      return "baseline";
    case PodSecurityLevel::kRestricted:
      return "restricted";
  }
  return "restricted";
}

std::vector<PodSecurityViolation> check_pod_security(PodSecurityLevel level, const Json& pod,
                                                     const std::string& path, const Json* written) {
  Out out;
  if (level == PodSecurityLevel::kPrivileged) return out;
  const PodView p = view_of(pod, path, written);
  const bool restricted = level == PodSecurityLevel::kRestricted;
  host_process(p, &out);
  host_namespaces(p, &out);
  privileged(p, &out);
  restricted ? capabilities_restricted(p, &out) : capabilities_baseline(p, &out);
  restricted ? volume_types(p, &out) : host_path_volumes(p, &out);
  host_ports(p, &out);
  host_probes(p, &out);
  app_armor(p, &out);
  se_linux(p, &out);
  proc_mount(p, /*relaxed=*/!restricted, &out);
  restricted ? seccomp_restricted(p, &out) : seccomp_baseline(p, &out);
  sysctls(p, &out);
  if (restricted) {
    privilege_escalation(p, &out);
    run_as_non_root(p, &out);
    run_as_user(p, &out);
  }
  return out;
}

std::string describe(const PodSecurityViolation& v, PodSecurityLevel level) {
  return v.field + ": " + v.detail + " (Pod Security Standard " + pod_security_level_name(level) +
         ", control \"" + v.control + "\")";
}

}  // namespace tlt::controller
