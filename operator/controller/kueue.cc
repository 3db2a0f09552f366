// Kueue's Workload as a function of a job, and what the reconciler reads back from one.
#include "operator/controller/kueue.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "operator/controller/job_status.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

constexpr const char* kKueueGroup = "kueue.x-k8s.io";
constexpr const char* kKueueVersion = "v1beta2";

// A container as Kueue reads it: name, image, resources.
Json slim_container(const Json& c) {
  Json out = Json::object();
  for (const char* k : {"name", "image", "resources"}) {
    if (c.contains(k)) out[k] = c[k];
  }
  return out;
}

Json slim_template(const Json& pod) {
  const Json& spec = pod.at("spec");
  Json s = Json::object();
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list)) continue;
    Json out = Json::array();
    for (const Json& c : spec[list]) out.push_back(slim_container(c));
    s[list] = out;
  }
  for (const char* k : {"nodeSelector", "affinity", "tolerations", "priorityClassName"}) {
    if (spec.contains(k)) s[k] = spec[k];
  }
  return {{"spec", s}};
}

// Pod sets as compare_pod_sets() compares them: name, count and the slim template, so that what
// the apiserver or Kueue adds to a stored Workload (defaults, metadata) is no difference.
Json comparable(const Json& pod_sets) {
  Json out = Json::array();
  for (const Json& ps : pod_sets.is_array() ? pod_sets : Json::array()) {
    Json tmpl = ps.value("template", Json::object());
    Json spec = tmpl.is_object() ? tmpl.value("spec", Json::object()) : Json::object();
    out.push_back({{"name", ps.value("name", "")},
                   {"count", ps.value("count", 1)},
                   {"template", slim_template({{"spec", spec}})}});
  }
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool condition_true(const Json& conditions, const std::string& type) {
  Json c = find_condition(conditions, type);
  return c.is_object() && c.value("status", "") == "True";
}

// `conditions` with `c` in place of its type's condition (appended when absent); the stored
// lastTransitionTime is kept while the status is unchanged.
Json set_condition(const Json& conditions, Json c) {
  Json out = Json::array();
  bool placed = false;
  for (const Json& have : conditions) {
    if (have.value("type", "") != c.value("type", "")) {
      out.push_back(have);
      continue;
    }
    if (placed) continue;
    if (have.value("status", "") == c.value("status", ""))
      c["lastTransitionTime"] = have.value("lastTransitionTime", c.value("lastTransitionTime", ""));
    out.push_back(c);
    placed = true;
  }
  if (!placed) out.push_back(c);
  return out;
}

Json workload_condition(const std::string& type, bool is_true, const std::string& reason,
                        const std::string& message, const std::string& now) {
  return {{"type", type},
          {"status", is_true ? "True" : "False"},
          {"reason", reason},
          {"message", message.substr(0, 32768)},
          {"lastTransitionTime", now}};
}

}  // namespace

kube::Resource workload_resource(const std::string& ns) {
  return {kKueueGroup, kKueueVersion, "workloads", ns};
}
kube::Resource resource_flavor_resource() {
  return {kKueueGroup, kKueueVersion, "resourceflavors", ""};
}
kube::Resource workload_priority_class_resource() {
  return {kKueueGroup, kKueueVersion, "workloadpriorityclasses", ""};
}
kube::Resource priority_class_resource() {
  return {"scheduling.k8s.io", "v1", "priorityclasses", ""};
}

std::string queue_name(const JobView& job) {
  auto it = job.labels.find(kQueueNameLabel);
  return it == job.labels.end() ? "" : it->second;
}

std::string workload_name(const std::string& kind, const std::string& job) {
  return lower(kind) + "-" + job;
}

std::optional<WorkloadPriority> named_priority(const JobView& job) {
  auto it = job.labels.find(kWorkloadPriorityLabel);
  if (it != job.labels.end() && !it->second.empty())
    return WorkloadPriority{kKueueGroup, "WorkloadPriorityClass", it->second, 0};
  for (const RoleView& role : job.roles) {
    const Json spec = role.pod_template.value("spec", Json::object());
    const Json name = spec.is_object() ? spec.value("priorityClassName", Json()) : Json();
    if (name.is_string() && !name.get<std::string>().empty())
      return WorkloadPriority{"scheduling.k8s.io", "PriorityClass", name.get<std::string>(), 0};
  }
  return std::nullopt;
}

StatusOr<int32_t> priority_value(const Json& priority_class) {
  const Json v = priority_class.value("value", Json());
  std::string name = priority_class.value("metadata", Json::object()).value("name", "");
  if (!v.is_number_integer())
    return Status::InvalidArgument("priority class " + name + " has no integer value");
  return v.get<int32_t>();
}

Json workload_pod_sets(const JobView& job, const PodOptions& options) {
  Json sets = Json::array();
  for (const RoleView& role : job.roles) {
    sets.push_back({{"name", role.name},
                    {"count", role.replicas},
                    {"template", slim_template(desired_pod(job, role, 0, options))}});
  }
  return sets;
}

Json desired_workload(const JobView& job, const PodOptions& options,
                      const std::optional<WorkloadPriority>& priority) {
  Json spec = {{"queueName", queue_name(job)}, {"podSets", workload_pod_sets(job, options)}};
  if (priority) {
    spec["priorityClassRef"] = {
        {"group", priority->group}, {"kind", priority->kind}, {"name", priority->name}};
    spec["priority"] = priority->value;
  }
  Json meta = child_object_meta(job, workload_name(job.meta.kind, job.meta.name));
  meta["labels"][kJobUidLabel] = job.meta.uid;  // how Kueue's own integrations find theirs
  return {{"apiVersion", std::string(kKueueGroup) + "/" + kKueueVersion},
          {"kind", "Workload"},
          {"metadata", meta},
          {"spec", spec}};
}

Json find_condition(const Json& conditions, const std::string& type) {
  if (!conditions.is_array()) return Json();
  for (const Json& c : conditions) {
    if (c.is_object() && c.value("type", "") == type) return c;
  }
  return Json();
}

WorkloadView read_workload(const Json& w) {
  WorkloadView v;
  const Json meta = w.value("metadata", Json::object());
  v.name = meta.value("name", "");
  v.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  const Json spec = w.value("spec", Json::object());
  v.queue = spec.value("queueName", "");
  v.pod_sets = spec.value("podSets", Json::array());
  const Json status = w.value("status", Json::object());
  v.conditions = status.value("conditions", Json::array());
  if (!v.conditions.is_array()) v.conditions = Json::array();
  v.quota_reserved = condition_true(v.conditions, "QuotaReserved");
  v.admitted = condition_true(v.conditions, "Admitted");
  v.evicted = condition_true(v.conditions, "Evicted");
  v.finished = condition_true(v.conditions, "Finished");
  v.pods_ready = condition_true(v.conditions, "PodsReady");
  v.pods_ready_seen = find_condition(v.conditions, "PodsReady").is_object();
  const Json admission = status.value("admission", Json());
  if (!admission.is_object()) return v;
  v.cluster_queue = admission.value("clusterQueue", "");
  std::map<std::string, int32_t> spec_counts;
  for (const Json& ps : v.pod_sets) spec_counts[ps.value("name", "")] = ps.value("count", 0);
  for (const Json& a : admission.value("podSetAssignments", Json::array())) {
    const std::string name = a.value("name", "");
    const Json count = a.value("count", Json());
    v.admitted_counts[name] = count.is_number_integer() ? count.get<int32_t>() : spec_counts[name];
    std::set<std::string> flavors;
    const Json by_resource = a.value("flavors", Json::object());  // outlives items()
    for (const auto& [resource, flavor] : by_resource.items()) {
      if (flavor.is_string()) flavors.insert(flavor.get<std::string>());
    }
    v.flavors[name] = std::vector<std::string>(flavors.begin(), flavors.end());
  }
  return v;
}

PodSetFit compare_pod_sets(const Json& want_sets, const WorkloadView& have) {
  const Json want = comparable(want_sets), stored = comparable(have.pod_sets);
  if (want == stored) return PodSetFit::kSame;
  if (!have.admitted || want.size() != stored.size()) return PodSetFit::kDifferent;
  for (size_t i = 0; i < want.size(); ++i) {
    const Json& w = want[i];
    const Json& h = stored[i];
    if (w.value("name", "") != h.value("name", "") ||
        w.value("template", Json()) != h.value("template", Json()))
      return PodSetFit::kDifferent;
    auto it = have.admitted_counts.find(w.value("name", ""));
    int32_t admitted = it == have.admitted_counts.end() ? h.value("count", 0) : it->second;
    if (w.value("count", 0) > admitted) return PodSetFit::kDifferent;
  }
  return PodSetFit::kWithin;
}

Status add_flavor(const Json& flavor, Placement* placement) {
  const Json spec = flavor.value("spec", Json::object());
  const std::string name = flavor.value("metadata", Json::object()).value("name", "");
  const Json labels = spec.value("nodeLabels", Json::object());  // outlives items()
  for (const auto& [key, value] : labels.items()) {
    auto have = placement->node_selector.find(key);
    if (have != placement->node_selector.end() && *have != value) {
      return Status::InvalidArgument("ResourceFlavor " + name + " sets node label " + key + "=" +
                                     value.dump() + " but another flavour of the pod set sets " +
                                     have->dump() + "; give the pod set's flavours one value");
    }
    placement->node_selector[key] = value;
  }
  for (const Json& t : spec.value("tolerations", Json::array())) {
    if (std::find(placement->tolerations.begin(), placement->tolerations.end(), t) ==
        placement->tolerations.end())
      placement->tolerations.push_back(t);
  }
  return Status::Ok();
}

void apply_placement(const Placement& placement, Json* pod) {
  Json& spec = (*pod)["spec"];
  if (!placement.node_selector.empty()) {
    Json selector = spec.value("nodeSelector", Json::object());
    for (const auto& [k, v] : placement.node_selector.items()) selector[k] = v;
    spec["nodeSelector"] = selector;
  }
  if (!placement.tolerations.empty()) {
    Json tolerations = spec.value("tolerations", Json::array());
    for (const Json& t : placement.tolerations) {
      if (std::find(tolerations.begin(), tolerations.end(), t) == tolerations.end())
        tolerations.push_back(t);
    }
    spec["tolerations"] = tolerations;
  }
}

Json requeue_status(const WorkloadView& w, const std::string& now) {
  Json evicted = find_condition(w.conditions, "Evicted");
  const std::string reason = evicted.is_object() ? evicted.value("reason", "") : "";
  const std::string message = evicted.is_object() ? evicted.value("message", "") : "";
  Json c = w.conditions;
  c = set_condition(c, workload_condition("QuotaReserved", false, "Pending", message, now));
  c = set_condition(c, workload_condition("Admitted", false, "NoReservation",
                                          "The workload has no reservation", now));
  bool requeued = reason == "Preempted" || reason == "NodeFailures";
  c = set_condition(c, workload_condition("Requeued", requeued, reason.empty() ? "Evicted" : reason,
                                          message, now));
  return {{"admission", nullptr}, {"conditions", c}};
}

Json condition_status(const WorkloadView& w, const std::string& type, bool is_true,
                      const std::string& reason, const std::string& message,
                      const std::string& now) {
  return {{"conditions",
           set_condition(w.conditions, workload_condition(type, is_true, reason, message, now))}};
}

std::vector<std::pair<std::string, Json>> mirrored_conditions(const WorkloadView* w,
                                                              const std::string& why,
                                                              const Json& job_status,
                                                              int64_t generation,
                                                              const std::string& now) {
  std::vector<std::pair<std::string, Json>> out;
  for (const char* type : {"QuotaReserved", "Admitted", "Evicted"}) {
    Json have = w ? find_condition(w->conditions, type) : Json();
    bool is_true = have.is_object() && have.value("status", "") == "True";
    std::string reason = have.is_object() ? have.value("reason", "") : "";
    std::string message = have.is_object() ? have.value("message", "") : "";
    if (reason.empty()) reason = "WorkloadPending";
    if (message.empty())
      message = w ? "Workload " + w->name + " has no " + type + " condition yet." : why;
    out.emplace_back(type,
                     make_condition(job_status, type, is_true, reason, message, generation, now));
  }
  return out;
}

}  // namespace tlt::controller
