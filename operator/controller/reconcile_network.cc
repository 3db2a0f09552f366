// The reconciler's steps for the job's network surface (job_network.h): its Secret and its
// NetworkPolicy.
#include "operator/controller/job_network.h"
#include "operator/controller/log.h"
#include "operator/controller/reconciler.h"
#include "runtime/cluster/job_secret.h"

namespace tlt::controller {

using Json = nlohmann::json;

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
    LogFields f{{"kind", job.meta.kind},
                {"job", job.meta.namespace_ + "/" + job.meta.name},
                {"secret", name}};
    log_info("Created the job's Secret.", f);
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
           {{"kind", job.meta.kind},
            {"job", job.meta.namespace_ + "/" + job.meta.name},
            {"networkpolicy", name}});
  return Status::Ok();
}

}  // namespace tlt::controller
