// Desired objects from a job's spec: pods, the headless Service, the spec ConfigMap.
#include "operator/controller/desired.h"

#include <algorithm>
#include <utility>

#include "api/labels.h"
#include "api/spec.h"
#include "operator/controller/reward_sidecar.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

constexpr const char* kSpecVolume = "tlt-spec";
constexpr const char* kSpecDir = "/etc/tlt";
constexpr const char* kTmpVolume = "tlt-tmp";  // /tmp: the runtime's only writable place

// Sets object[key] = value unless the object already has the key (the podTemplate's own choice;
// null is the key's absence, as on the apiserver).
void set_default(Json* object, const char* key, const Json& value) {
  if (!object->is_object()) *object = Json::object();
  auto it = object->find(key);
  if (it == object->end() || it->is_null()) (*object)[key] = value;
}

// A container under the `restricted` Pod Security Standard, where the template is silent: no
// privilege escalation, every capability dropped.
void restrict_container(Json* c) {
  Json& sc = (*c)["securityContext"];
  set_default(&sc, "allowPrivilegeEscalation", false);
  set_default(&sc, "capabilities", {{"drop", {"ALL"}}});
}

// The pod's securityContext under `restricted`, where the template is silent: non-root as the
// runtime image's user, RuntimeDefault seccomp.
void restrict_pod(Json* spec) {
  Json& psc = (*spec)["securityContext"];
  set_default(&psc, "runAsNonRoot", true);
  set_default(&psc, "runAsUser", kRuntimeUser);
  set_default(&psc, "runAsGroup", kRuntimeUser);
  set_default(&psc, "seccompProfile", {{"type", "RuntimeDefault"}});
}

// The labels of every owned object.
Json child_labels(const JobView& job) {
  Json labels = job_selector_labels(job);
  labels[kManagedByLabel] = kManagedBy;
  return labels;
}

// &object[key] when `object` is an object whose `key` holds a value of JSON type `type`; nullptr
// otherwise. Never throws.
const Json* typed(const Json& object, const char* key, Json::value_t type) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end()) return nullptr;
  return it->type() == type ? &*it : nullptr;
}

// object[key] when it has fallback's JSON type, `fallback` otherwise. The template's types are
// checked before it is read (pod_template.h); here a wrong one reads as absent.
Json member(const Json& object, const char* key, const Json& fallback) {
  const Json* v = typed(object, key, fallback.type());
  return v ? *v : fallback;
}

// The `name` of a list entry: "" unless it is an object with a string name.
std::string name_of(const Json& entry) {
  return member(entry, "name", "").get<std::string>();
}

// Replaces the entry of `list` (an array of objects) whose `name` equals item's, or appends.
void upsert_named(Json* list, const Json& item) {
  if (!list->is_array()) *list = Json::array();
  for (Json& e : *list) {
    if (e.is_object() && name_of(e) == name_of(item)) {
      e = item;
      return;
    }
  }
  list->push_back(item);
}

Json env_var(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

// An RLJob pod's weight-sync rendezvous (desired.h): the env of every pod, and the named
// container port of trainer pod 0, which hosts the group's store.
void add_weight_sync(const JobView& job, const RoleView& role, int index, Json* container,
                     Json* env) {
  const std::string port = std::to_string(kWeightSyncPort);
  const std::string host = pod_name(job.meta.name, "trainer", 0) + "." +
                           service_name(job.meta.kind, job.meta.name) + "." + job.meta.namespace_ +
                           ".svc";
  upsert_named(env, env_var("TLT_WEIGHT_SYNC_PORT", port));
  upsert_named(env, env_var("TLT_WEIGHT_SYNC_ADDRESS", host + ":" + port));
  if (role.name != "trainer" || index != 0) return;
  Json ports = member(*container, "ports", Json::array());
  upsert_named(
      &ports,
      {{"name", kWeightSyncPortName}, {"containerPort", kWeightSyncPort}, {"protocol", "TCP"}});
  (*container)["ports"] = ports;
}

// An RLJob trainer pod's place in the trainer group (desired.h): the world size (the trainer
// role's replicas), the group's store address and, on trainer pod 0, the named container port.
void add_trainer_group(const JobView& job, const RoleView& role, int index, int port_number,
                       Json* container, Json* env) {
  if (role.name != "trainer") return;
  const std::string port = std::to_string(port_number);
  const std::string host = pod_name(job.meta.name, "trainer", 0) + "." +
                           service_name(job.meta.kind, job.meta.name) + "." + job.meta.namespace_ +
                           ".svc";
  upsert_named(env, env_var("TLT_TRAINER_WORLD", std::to_string(role.replicas)));
  upsert_named(env, env_var("TLT_TRAINER_GROUP_PORT", port));
  upsert_named(env, env_var("TLT_TRAINER_GROUP_ADDRESS", host + ":" + port));
  if (index != 0) return;
  Json ports = member(*container, "ports", Json::array());
  upsert_named(
      &ports,
      {{"name", kTrainerGroupPortName}, {"containerPort", port_number}, {"protocol", "TCP"}});
  (*container)["ports"] = ports;
}

// The operator's container, merged over the template's "tlt" container (if any).
Json tlt_container(const JobView& job, const RoleView& role, int index, const Json& base,
                   const PodOptions& options) {
  Json c = base.is_object() ? base : Json::object();
  c["name"] = kContainerName;
  if (!c.contains("image")) c["image"] = options.runtime_image;
  c["command"] = {"tlt", "run-role"};
  Json env = member(c, "env", Json::array());
  const std::string& ns = job.meta.namespace_;
  for (const Json& e :
       {env_var("TLT_JOB", job.meta.name), env_var("TLT_ROLE", role.name),
        env_var("TLT_INDEX", std::to_string(index)), env_var("TLT_NAMESPACE", ns),
        env_var("TLT_SERVICE", service_name(job.meta.kind, job.meta.name) + "." + ns + ".svc"),
        env_var("TLT_JOB_FILE", std::string(kSpecDir) + "/job.json"),
        env_var("TLT_RENDEZVOUS_PORT", std::to_string(options.rendezvous_port))}) {
    upsert_named(&env, e);
  }
  if (job.meta.kind == api::kRLJobKind) {
    add_weight_sync(job, role, index, &c, &env);
    add_trainer_group(job, role, index, options.trainer_group_port, &c, &env);
  }
  c["env"] = env;
  if (!role.resources.empty()) c["resources"] = role.resources;
  Json mounts = member(c, "volumeMounts", Json::array());
  upsert_named(&mounts, {{"name", kSpecVolume}, {"mountPath", kSpecDir}, {"readOnly", true}});
  upsert_named(&mounts, {{"name", kTmpVolume}, {"mountPath", "/tmp"}});
  c["volumeMounts"] = mounts;
  restrict_container(&c);
  set_default(&c["securityContext"], "readOnlyRootFilesystem", true);
  return c;
}

// Whether the runtime of pod `name` talks to the apiserver: an RLJob's trainer 0 reads the
// rebalancer's assignments and writes the job's progress (runtime/cli/rl_command.cc); a
// TSTPretrainJob's runtime does neither.
bool uses_apiserver(const JobView& job, const std::string& name) {
  return job.meta.kind == api::kRLJobKind && name == progress_pod_name(job);
}

// A Role rule on pods: `verb` on exactly `names` (sorted).
Json pod_rule(const char* verb, const std::vector<std::string>& names) {
  return {
      {"apiGroups", {""}}, {"resources", {"pods"}}, {"verbs", {verb}}, {"resourceNames", names}};
}

}  // namespace

std::string pod_name(const std::string& job, const std::string& role, int index) {
  return api::pod_name(job, role, index);
}

std::string service_name(const std::string& kind, const std::string& job) {
  return job + (kind == api::kRLJobKind ? "-rl" : "-tst");
}

std::string configmap_name(const std::string& kind, const std::string& job) {
  return service_name(kind, job) + "-spec";
}

std::vector<std::string> legacy_child_names(const std::string& job) {
  return {job, job + "-spec"};
}

std::string owned_selector() {
  return std::string(kManagedByLabel) + "=" + kManagedBy + "," + kJobLabel;
}

Json missing_labels(const Json& have, const Json& want) {
  Json out = Json::object();
  const Json* want_meta = typed(want, "metadata", Json::value_t::object);
  const Json* want_labels =
      want_meta ? typed(*want_meta, "labels", Json::value_t::object) : nullptr;
  if (!want_labels) return out;
  const Json* have_meta = typed(have, "metadata", Json::value_t::object);
  const Json* have_labels =
      have_meta ? typed(*have_meta, "labels", Json::value_t::object) : nullptr;
  for (const char* k : {kJobLabel, kKindLabel, kManagedByLabel, kRoleLabel, kIndexLabel}) {
    auto w = want_labels->find(k);
    if (w == want_labels->end()) continue;
    const Json* h = have_labels ? typed(*have_labels, k, Json::value_t::string) : nullptr;
    if (!h || *h != *w) out[k] = *w;
  }
  return out;
}

std::string pod_selector(const std::string& job) {
  return std::string(kJobLabel) + "=" + job;
}

bool owned_by(const Json& object, const std::string& uid) {
  const Json* meta = typed(object, "metadata", Json::value_t::object);
  const Json* refs = meta ? typed(*meta, "ownerReferences", Json::value_t::array) : nullptr;
  if (!refs) return false;
  for (const Json& ref : *refs) {
    const Json* controller = typed(ref, "controller", Json::value_t::boolean);
    const Json* ref_uid = typed(ref, "uid", Json::value_t::string);
    if (controller && controller->get<bool>() && ref_uid && *ref_uid == uid) return true;
  }
  return false;
}

Json owner_reference(const ObservedJob& job) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", job.kind},
          {"name", job.name},
          {"uid", job.uid},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

Json job_selector_labels(const JobView& job) {
  return {{kJobLabel, job.meta.name}, {kKindLabel, job.meta.kind}};
}

Json child_object_meta(const JobView& job, const std::string& name) {
  return {{"name", name},
          {"namespace", job.meta.namespace_},
          {"labels", child_labels(job)},
          {"ownerReferences", Json::array({owner_reference(job.meta)})}};
}

Json desired_configmap(const JobView& job) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", child_object_meta(job, configmap_name(job.meta.kind, job.meta.name))},
          {"data", {{"job.json", job.document.dump(2) + "\n"}}}};
}

Json desired_service(const JobView& job, const PodOptions& options) {
  Json ports = {{{"name", "rendezvous"}, {"port", options.rendezvous_port}, {"protocol", "TCP"}}};
  if (job.meta.kind == api::kRLJobKind) {
    ports.push_back(
        {{"name", kWeightSyncPortName}, {"port", kWeightSyncPort}, {"protocol", "TCP"}});
    ports.push_back({{"name", kTrainerGroupPortName},
                     {"port", options.trainer_group_port},
                     {"protocol", "TCP"}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", child_object_meta(job, service_name(job.meta.kind, job.meta.name))},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", job_selector_labels(job)},
            {"ports", ports}}}};
}

Json desired_pod(const JobView& job, const RoleView& role, int index, const PodOptions& options) {
  const Json& tmpl = role.pod_template;
  std::string name = pod_name(job.meta.name, role.name, index);
  Json meta = member(tmpl, "metadata", Json::object());
  Json labels = member(meta, "labels", Json::object());
  for (const auto& [k, v] : job.labels) labels[k] = v;
  labels[kJobLabel] = job.meta.name;
  labels[kKindLabel] = job.meta.kind;
  labels[kRoleLabel] = role.name;
  labels[kIndexLabel] = std::to_string(index);
  if (job.meta.kind == api::kRLJobKind && role.name == "trainer")
    labels[kTrainerWorldLabel] = std::to_string(role.replicas);
  labels[kManagedByLabel] = kManagedBy;
  meta["labels"] = labels;
  meta["name"] = name;
  meta["namespace"] = job.meta.namespace_;
  meta["ownerReferences"] = Json::array({owner_reference(job.meta)});
  meta.erase("generateName");

  Json spec = member(tmpl, "spec", Json::object());
  Json containers = member(spec, "containers", Json::array());
  Json base = Json::object();
  for (const Json& c : containers) {
    if (c.is_object() && name_of(c) == kContainerName) base = c;
  }
  Json ours = tlt_container(job, role, index, base, options);
  Json merged = Json::array({ours});
  for (const Json& c : containers) {
    if (c.is_object() && name_of(c) != kContainerName) merged.push_back(c);
  }
  spec["containers"] = merged;
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (Json& c : spec[list]) {
      if (c.is_object()) restrict_container(&c);
    }
  }
  restrict_pod(&spec);
  Json volumes = member(spec, "volumes", Json::array());
  upsert_named(&volumes, {{"name", kSpecVolume},
                          {"configMap", {{"name", configmap_name(job.meta.kind, job.meta.name)}}}});
  upsert_named(&volumes, {{"name", kTmpVolume}, {"emptyDir", Json::object()}});
  spec["volumes"] = volumes;
  add_reward_sidecar(job, role, &spec);  // an RLJob trainer's reward container, if any
  add_job_credentials(job, uses_apiserver(job, name), &spec);  // in the tlt container only
  spec["restartPolicy"] = "Never";
  if (!spec.contains("serviceAccountName") && !spec.contains("serviceAccount"))
    spec["serviceAccountName"] = identity_name(job.meta.kind, job.meta.name);
  if (name.size() <= 63) spec["hostname"] = name;  // a DNS label
  spec["subdomain"] = service_name(job.meta.kind, job.meta.name);
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
}

std::string identity_name(const std::string& kind, const std::string& job) {
  return service_name(kind, job);
}

std::string progress_pod_name(const JobView& job) {
  return pod_name(job.meta.name, job.completion_role, 0);
}

Json desired_service_account(const JobView& job) {
  return {{"apiVersion", "v1"},
          {"kind", "ServiceAccount"},
          {"metadata", child_object_meta(job, identity_name(job.meta.kind, job.meta.name))},
          {"automountServiceAccountToken", false}};
}

Json desired_role(const JobView& job) {
  std::vector<std::string> pods;
  bool progress_pod = false;
  for (const RoleView& role : job.roles) {
    for (int i = 0; i < role.replicas; ++i) pods.push_back(pod_name(job.meta.name, role.name, i));
    progress_pod = progress_pod || (role.name == job.completion_role && role.replicas > 0);
  }
  std::sort(pods.begin(), pods.end());
  Json rules = Json::array();
  if (!pods.empty()) rules.push_back(pod_rule("get", pods));
  if (progress_pod) rules.push_back(pod_rule("patch", {progress_pod_name(job)}));
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "Role"},
          {"metadata", child_object_meta(job, identity_name(job.meta.kind, job.meta.name))},
          {"rules", rules}};
}

Json desired_role_binding(const JobView& job) {
  const std::string name = identity_name(job.meta.kind, job.meta.name);
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", child_object_meta(job, name)},
      {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", name}}},
      {"subjects",
       {{{"kind", "ServiceAccount"}, {"name", name}, {"namespace", job.meta.namespace_}}}}};
}

}  // namespace tlt::controller
