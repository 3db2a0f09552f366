// The reconciler's steps for a job's children other than its pods (reconciler.h): creating one
// without adopting another's, restoring labels a child lost, keeping each as desired (the
// ConfigMap, the Service, the identity, the Secret and the NetworkPolicy), and deleting them all
// with the job.
#include <algorithm>

#include "operator/controller/job_network.h"
#include "operator/controller/log.h"
#include "operator/controller/reconciler.h"
#include "runtime/cluster/job_secret.h"

namespace tlt::controller {

using Json = nlohmann::json;

StatusOr<Json> Reconciler::create_child(const kube::Resource& r, const Json& want,
                                        const ObservedJob& job, bool* created) {
  if (created) *created = false;
  StatusOr<Json> out = client_->create(r, want);
  if (out.ok() && created) *created = true;
  if (out.ok() || out.status().code() != StatusCode::kAlreadyExists) return out;
  // The name is taken: by this job (a create the cache has not shown yet, or a child that lost
  // its labels and so left the cache) or by someone else, whose object is never adopted or
  // overwritten.
  const std::string name = want["metadata"].value("name", "");
  StatusOr<Json> have = client_->get(r, name);
  if (have.ok() && owned_by(*have, job.uid))
    return relabel(r, *have, missing_labels(*have, want), job);
  if (!have.ok()) {
    return have.status().code() == StatusCode::kNotFound
               ? Status::Unavailable(out.status().message() + " (then gone: retrying)")
               : have.status();
  }
  return foreign(want.value("kind", r.plural), name);
}

Status Reconciler::foreign(const std::string& kind, const std::string& name) {
  return Status::AlreadyExists(kind + " " + name +
                               " already exists and is not owned by this job; the operator "
                               "leaves it alone: delete or rename it");
}

StatusOr<Json> Reconciler::relabel(const kube::Resource& r, const Json& have, const Json& labels,
                                   const ObservedJob& job) {
  if (labels.empty()) return have;
  const Json& meta = have["metadata"];
  const std::string name = meta.value("name", "");
  Json patch = {
      {"metadata", {{"labels", labels}, {"resourceVersion", meta.value("resourceVersion", "")}}}};
  StatusOr<Json> out = client_->patch(r, name, patch);
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  log_info("Restored the labels of an object the job owns.",
           fields(job, {{"object", r.plural + "/" + name}, {"labels", labels.dump()}}));
  event(job, "Normal", "Relabeled",
        "Restored the labels " + labels.dump() + " of " + r.plural + "/" + name + ".");
  return out;
}

Status Reconciler::adopt_strays(const ObservedJob& job) {
  Json labels = {{kJobLabel, job.name}, {kKindLabel, job.kind}, {kManagedByLabel, kManagedBy}};
  for (const kube::Resource& r : owned_resources(job.namespace_)) {
    ObjectStore* store = cache_->store(r.plural);
    for (const std::string& name : store->strays(job.namespace_, job.uid)) {
      StatusOr<Json> have = client_->get(r, name);
      if (!have.ok() && have.status().code() != StatusCode::kNotFound) return have.status();
      if (have.ok() && owned_by(*have, job.uid) &&
          !(*have)["metadata"].contains("deletionTimestamp")) {
        Json want = {{"metadata", {{"labels", labels}}}};
        StatusOr<Json> out = relabel(r, *have, missing_labels(*have, want), job);
        if (!out.ok()) return out.status();
        cache_->written(r, *out);
      }
      store->forget_stray(job.namespace_, name);
    }
  }
  return Status::Ok();
}

Status Reconciler::ensure_child(const kube::Resource& r, const Json& want, const ObservedJob& job) {
  const std::string kind = want["kind"], name = want["metadata"]["name"];
  const std::string digest = child_digest(r.plural, want);
  auto same = [&](const Json& o) { return child_digest(r.plural, o) == digest; };
  std::optional<Json> have = cache_->get(r, name);
  if (have && !owned_by(*have, job.uid)) return foreign(kind, name);
  if (have && have->value("digest", "") == digest) return Status::Ok();
  StatusOr<Json> out = have ? client_->apply(r, want, kFieldManager) : create_child(r, want, job);
  if (out.ok() && !same(*out)) out = client_->apply(r, want, kFieldManager);  // from an older spec
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  log_info(have ? "Updated an object the job owns." : "Created an object the job owns.",
           fields(job, {{"object", kind + "/" + name}}));
  return Status::Ok();
}

Status Reconciler::reconcile_configmap(const JobView& job) {
  return ensure_child(configmap_resource(job.meta.namespace_), desired_configmap(job), job.meta);
}

Status Reconciler::reconcile_identity(const JobView& job) {
  const std::string& ns = job.meta.namespace_;
  // In this order: a RoleBinding is checked against its Role's rules when it is created.
  TLT_RETURN_IF_ERROR(
      ensure_child(serviceaccount_resource(ns), desired_service_account(job), job.meta));
  TLT_RETURN_IF_ERROR(ensure_child(role_resource(ns), desired_role(job), job.meta));
  return ensure_child(rolebinding_resource(ns), desired_role_binding(job), job.meta);
}

Status Reconciler::reconcile_service(const JobView& job) {
  kube::Resource r = service_resource(job.meta.namespace_);
  const std::string name = service_name(job.meta.kind, job.meta.name);
  const Json want = desired_service(job, options_.pod);
  const std::string digest = child_digest(r.plural, want);
  std::optional<Json> have = cache_->get(r, name);
  if (have && !owned_by(*have, job.meta.uid)) return foreign("Service", name);
  if (have && have->value("digest", "") == digest) return Status::Ok();
  if (have) return restore_service(r, want, job.meta);
  // Not in the cache: not created yet, or someone else's that carries no tlt.dev/job label (the
  // informers watch only labelled ones): create_child tells which.
  StatusOr<Json> out = create_child(r, want, job.meta);
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  if (child_digest(r.plural, *out) != digest) return restore_service(r, want, job.meta);
  log_info("Created the job's headless Service.", fields(job.meta, {{"service", name}}));
  return Status::Ok();
}

Status Reconciler::restore_service(const kube::Resource& r, const Json& want,
                                   const ObservedJob& job) {
  const std::string name = want["metadata"]["name"];
  StatusOr<Json> live = client_->get(r, name);
  if (!live.ok()) return live.status();
  if (!owned_by(*live, job.uid)) return foreign("Service", name);
  // A merge patch replaces lists whole (ports); selector keys that the job does not set are
  // removed one by one (null); the type goes back to ClusterIP.
  Json spec = want["spec"];
  spec["type"] = "ClusterIP";
  const Json live_spec = live->value("spec", Json::object());
  const Json live_selector = live_spec.is_object() ? live_spec.value("selector", Json()) : Json();
  if (live_selector.is_object()) {
    for (const auto& [k, v] : live_selector.items()) {
      if (!spec["selector"].contains(k)) spec["selector"][k] = nullptr;
    }
  }
  Json patch = {
      {"metadata", {{"resourceVersion", (*live)["metadata"].value("resourceVersion", "")}}},
      {"spec", spec}};
  StatusOr<Json> out = client_->patch(r, name, patch);
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  log_info("Restored the spec of the job's headless Service.", fields(job, {{"service", name}}));
  event(job, "Normal", "ServiceRestored",
        "Restored the spec of Service " + name + ", which differed from the job's.");
  return Status::Ok();
}

Status Reconciler::reconcile_secret(const JobView& job) {
  const kube::Resource r = secret_resource(job.meta.namespace_);
  const std::string name = job_secret_name(job.meta.kind, job.meta.name);
  const Status not_owned = Status::AlreadyExists(
      "Secret " + name +
      " already exists and is not owned by this job; the operator does not adopt it (the job's "
      "pods would trust whatever it holds): delete or rename that Secret, then edit or "
      "recreate the job");
  if (std::optional<Json> have = cache_->get(r, name))
    return owned_by(*have, job.meta.uid) ? Status::Ok() : not_owned;
  // Not in the cache: not created yet, created by a pass whose write the watch has not shown,
  // or someone else's. create_child() tells them apart; a fresh value is drawn each time but only
  // the one in a new Secret is ever used.
  StatusOr<std::string> value = cluster::generate_job_secret();
  if (!value.ok()) return value.status();
  bool created = false;
  StatusOr<Json> out = create_child(r, desired_job_secret(job, *value), job.meta, &created);
  if (!out.ok())
    return out.status().code() == StatusCode::kAlreadyExists ? not_owned : out.status();
  cache_->written(r, *out);
  if (created) {
    log_info("Created the job's Secret.", fields(job.meta, {{"secret", name}}));
  }
  return Status::Ok();
}

Status Reconciler::reconcile_network_policy(const JobView& job) {
  const kube::Resource r = networkpolicy_resource(job.meta.namespace_);
  const NetworkPolicyOptions& options = options_.pod.network_policy;
  if (options.enabled) return ensure_child(r, desired_network_policy(job, options), job.meta);
  const std::string name = network_policy_name(job.meta.kind, job.meta.name);
  std::optional<Json> have = cache_->get(r, name);
  if (!have || !owned_by(*have, job.meta.uid)) return Status::Ok();
  if ((*have)["metadata"].contains("deletionTimestamp")) return Status::Ok();  // on its way
  Status s = client_->remove(r, name);
  if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  cache_->deleted(r, name);
  log_info("Deleted the job's NetworkPolicy: the operator runs with --job-network-policy=false.",
           fields(job.meta, {{"networkpolicy", name}}));
  return Status::Ok();
}

Status Reconciler::remove_unseen(const ObservedJob& job, const kube::Resource& r,
                                 const std::string& name) {
  StatusOr<Json> have = client_->get(r, name);
  if (!have.ok())
    return have.status().code() == StatusCode::kNotFound ? Status::Ok() : have.status();
  const Json& meta = (*have)["metadata"];
  if (!owned_by(*have, job.uid) || meta.contains("deletionTimestamp")) return Status::Ok();
  Status s = client_->remove(r, name);
  if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  log_info("Deleted an owned object of a deleted job that the cache did not show.",
           fields(job, {{"object", r.plural + "/" + name}}));
  return Status::Ok();
}

Status Reconciler::finalize(const ObservedJob& job, const Json& object) {
  TLT_RETURN_IF_ERROR(adopt_strays(job));
  std::vector<Pod> pods = observe_pods(job);
  std::vector<const Pod*> live;
  for (const Pod& p : pods) {
    if (!p.deleting) live.push_back(&p);
  }
  TLT_RETURN_IF_ERROR(delete_pods(job, live, "JobDeleted"));
  // The pods the spec asks for that the cache does not show: gone, or without their labels.
  if (StatusOr<JobView> view = decode_job(job.kind, object); view.ok()) {
    for (const RoleView& role : view->roles) {
      for (int i = 0; i < role.replicas; ++i) {
        std::string name = pod_name(job.name, role.name, i);
        bool seen =
            std::any_of(pods.begin(), pods.end(), [&](const Pod& p) { return p.name == name; });
        if (!seen) TLT_RETURN_IF_ERROR(remove_unseen(job, pod_resource(job.namespace_), name));
      }
    }
  }
  std::vector<std::pair<kube::Resource, std::string>> owned = {
      {service_resource(job.namespace_), service_name(job.kind, job.name)},
      {configmap_resource(job.namespace_), configmap_name(job.kind, job.name)},
      {rolebinding_resource(job.namespace_), identity_name(job.kind, job.name)},
      {role_resource(job.namespace_), identity_name(job.kind, job.name)},
      {serviceaccount_resource(job.namespace_), identity_name(job.kind, job.name)},
      {secret_resource(job.namespace_), job_secret_name(job.kind, job.name)},
      {networkpolicy_resource(job.namespace_), network_policy_name(job.kind, job.name)}};
  const std::vector<std::string> legacy = legacy_child_names(job.name);  // (owned_by guards)
  owned.push_back({service_resource(job.namespace_), legacy[0]});
  owned.push_back({configmap_resource(job.namespace_), legacy[1]});
  if (options_.kueue)  // its quota released at once
    owned.push_back({workload_resource(job.namespace_), workload_name(job.kind, job.name)});
  for (const auto& [resource, name] : owned) {
    std::optional<Json> o = cache_->get(resource, name);
    if (!o) TLT_RETURN_IF_ERROR(remove_unseen(job, resource, name));
    if (!o || !owned_by(*o, job.uid)) continue;
    Status s = client_->remove(resource, name);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
    cache_->deleted(resource, name);
    log_info("Deleted an owned object of a deleted job.",
             fields(job, {{"object", resource.plural + "/" + name}}));
  }
  if (std::find(job.finalizers.begin(), job.finalizers.end(), kFinalizer) == job.finalizers.end())
    return Status::Ok();
  Json rest = Json::array();
  for (const std::string& f : job.finalizers) {
    if (f != kFinalizer) rest.push_back(f);
  }
  Json patch = {{"metadata", {{"finalizers", rest}, {"resourceVersion", job.resource_version}}}};
  kube::Resource r = job_resource(job.kind, job.namespace_);
  StatusOr<Json> out = client_->patch(r, job.name, patch);
  if (!out.ok() && out.status().code() != StatusCode::kNotFound) return out.status();
  if (out.ok()) cache_->written(r, *out);
  log_info("Cleaned up a deleted job and removed its finalizer.", fields(job));
  return Status::Ok();
}

}  // namespace tlt::controller
