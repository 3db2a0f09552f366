// Reading job objects: identity from raw JSON, the spec through api/ (decode + validate).
#include "operator/controller/job.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <type_traits>
#include <variant>

#include "api/encode.h"
#include "api/manifest.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

Json resources_json(const api::ResourceRequirements& r) {
  Json out = Json::object();
  auto side = [&](const char* name, const std::map<std::string, api::Quantity>& m) {
    if (m.empty()) return;
    Json q = Json::object();
    for (const auto& [k, v] : m) q[k] = v.text;
    out[name] = q;
  };
  side("requests", r.requests);
  side("limits", r.limits);
  return out;
}

template <class Role>
RoleView role_view(const std::string& name, const Role& role, const std::string& path) {
  return RoleView{name, role.replicas, resources_json(role.resources), role.pod_template.value,
                  path};
}

// The fields of the view that both kinds share.
template <class JobT>
void fill_common(const JobT& job, JobView* view) {
  view->labels = job.metadata.labels;
  view->suspend = job.spec.suspend;
  view->backoff_limit = job.spec.backoff_limit;
  view->ttl_seconds_after_finished = job.spec.ttl_seconds_after_finished;
  Json full = api::to_json(job);
  Json meta = {{"name", job.metadata.name}, {"namespace", job.metadata.namespace_}};
  if (!job.metadata.labels.empty()) meta["labels"] = full["metadata"]["labels"];
  view->document = {{"apiVersion", full["apiVersion"]},
                    {"kind", full["kind"]},
                    {"metadata", meta},
                    {"spec", full["spec"]}};
}

}  // namespace

const std::vector<std::string>& job_kinds() {
  static const std::vector<std::string> kinds{api::kRLJobKind, api::kTSTPretrainJobKind};
  return kinds;
}

kube::Resource job_resource(const std::string& kind, const std::string& namespace_) {
  return {api::kGroup, api::kVersion, kind == api::kRLJobKind ? "rljobs" : "tstpretrainjobs",
          namespace_};
}
kube::Resource pod_resource(const std::string& ns) {
  return {"", "v1", "pods", ns};
}
kube::Resource service_resource(const std::string& ns) {
  return {"", "v1", "services", ns};
}
kube::Resource configmap_resource(const std::string& ns) {
  return {"", "v1", "configmaps", ns};
}
kube::Resource event_resource(const std::string& ns) {
  return {"", "v1", "events", ns};
}
kube::Resource serviceaccount_resource(const std::string& ns) {
  return {"", "v1", "serviceaccounts", ns};
}
kube::Resource role_resource(const std::string& ns) {
  return {"rbac.authorization.k8s.io", "v1", "roles", ns};
}
kube::Resource rolebinding_resource(const std::string& ns) {
  return {"rbac.authorization.k8s.io", "v1", "rolebindings", ns};
}
kube::Resource secret_resource(const std::string& ns) {
  return {"", "v1", "secrets", ns};
}
kube::Resource networkpolicy_resource(const std::string& ns) {
  return {"networking.k8s.io", "v1", "networkpolicies", ns};
}
std::vector<kube::Resource> owned_resources(const std::string& ns) {
  return {pod_resource(ns),       service_resource(ns),
          configmap_resource(ns), serviceaccount_resource(ns),
          role_resource(ns),      rolebinding_resource(ns),
          secret_resource(ns),    networkpolicy_resource(ns)};
}

Json event_object(const ObservedJob& job, const std::string& type, const std::string& reason,
                  const std::string& message, const std::string& component,
                  const std::string& now) {
  static std::atomic<uint64_t> counter{0};
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  char suffix[40];
  std::snprintf(suffix, sizeof suffix, "%llx%llx", static_cast<unsigned long long>(nanos),
                static_cast<unsigned long long>(counter++));
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", job.name + "." + suffix}, {"namespace", job.namespace_}}},
          {"involvedObject",
           {{"apiVersion", api::kApiVersion},
            {"kind", job.kind},
            {"name", job.name},
            {"namespace", job.namespace_},
            {"uid", job.uid}}},
          {"type", type},
          {"reason", reason},
          {"message", message},
          {"source", {{"component", component}}},
          {"firstTimestamp", now},
          {"lastTimestamp", now},
          {"count", 1}};
}

ObservedJob observe_job(const std::string& kind, const Json& object) {
  ObservedJob o;
  o.kind = kind;
  const Json meta = object.value("metadata", Json::object());
  o.namespace_ = meta.value("namespace", "");
  o.name = meta.value("name", "");
  o.uid = meta.value("uid", "");
  o.resource_version = meta.value("resourceVersion", "");
  o.generation = meta.value("generation", int64_t{0});
  o.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  if (meta.contains("finalizers") && meta["finalizers"].is_array()) {
    for (const Json& f : meta["finalizers"]) {
      if (f.is_string()) o.finalizers.push_back(f.get<std::string>());
    }
  }
  if (object.contains("status") && object["status"].is_object()) o.status = object["status"];
  return o;
}

StatusOr<JobView> decode_job(const std::string& kind, const Json& object) {
  StatusOr<api::Job> job = api::parse_job_json(object);
  if (!job.ok()) return job.status();
  if (api::job_kind(*job) != kind) {
    return Status::InvalidArgument("kind: is " + api::job_kind(*job) + ", expected " + kind);
  }
  JobView view;
  view.meta = observe_job(kind, object);
  if (const auto* rl = std::get_if<api::RLJob>(&job.value())) {
    const auto& roles = rl->spec.roles;
    view.roles = {role_view("rollout", roles.rollout, "spec.roles.rollout"),
                  role_view("trainer", roles.trainer, "spec.roles.trainer"),
                  role_view("drafter", roles.drafter, "spec.roles.drafter")};
    view.completion_role = "trainer";
    fill_common(*rl, &view);
  } else {
    const auto& tst = std::get<api::TSTPretrainJob>(job.value());
    view.roles = {role_view("workers", tst.spec.workers, "spec.workers")};
    view.completion_role = "workers";
    fill_common(tst, &view);
  }
  return view;
}

std::string job_key(const std::string& kind, const std::string& ns, const std::string& name) {
  return kind + "/" + ns + "/" + name;
}

bool parse_key(const std::string& key, std::string* kind, std::string* ns, std::string* name) {
  size_t a = key.find('/');
  if (a == std::string::npos) return false;
  size_t b = key.find('/', a + 1);
  if (b == std::string::npos) return false;
  *kind = key.substr(0, a);
  *ns = key.substr(a + 1, b - a - 1);
  *name = key.substr(b + 1);
  return !kind->empty() && !name->empty();
}

}  // namespace tlt::controller
