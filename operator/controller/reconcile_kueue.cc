// The reconciler's Kueue steps (reconciler.h "kueue", the contract in kueue.h): the job's
// Workload made, replaced, requeued after an eviction and finished; the pods held until it is
// admitted and placed by its admission; its conditions mirrored onto the job.
#include <algorithm>

#include "operator/controller/kueue.h"
#include "operator/controller/log.h"
#include "operator/controller/reconciler.h"

namespace tlt::controller {

using Json = nlohmann::json;

namespace {

// `role`'s podTemplate with `placement` in its spec (the pods desired.h makes of it carry it).
void place_role(const Placement& placement, RoleView* role) {
  Json pod = role->pod_template.is_object() ? role->pod_template : Json::object();
  if (!pod.contains("spec") || !pod["spec"].is_object()) pod["spec"] = Json::object();
  apply_placement(placement, &pod);
  role->pod_template = pod;
}

std::string stored_condition_status(const Json& status, const std::string& type) {
  Json c = find_condition(status.value("conditions", Json::array()), type);
  return c.is_object() ? c.value("status", "") : "";
}

}  // namespace

bool Reconciler::kueue_managed(const JobView& job) const {
  return options_.kueue && !queue_name(job).empty();
}

void Reconciler::hold(const JobView& job, const std::string& reason, const std::string& message,
                      Outcome* o) {
  o->queued_reason = reason;
  o->queued_message = message;
  Json running = find_condition(job.meta.status.value("conditions", Json::array()), "Running");
  if (job.meta.status.value("phase", "") != kQueuedPhase || !running.is_object() ||
      running.value("message", "") != message) {
    log_info("The job waits for Kueue; no pods.", fields(job.meta, {{"reason", reason}}));
  }
}

void Reconciler::mirror(const JobView& job, const WorkloadView* workload, const std::string& why,
                        Outcome* o) {
  const std::string now = format_time(clock_->now());
  o->extra_conditions =
      mirrored_conditions(workload, why, job.meta.status, job.meta.generation, now);
  for (const auto& [type, c] : o->extra_conditions) {
    const std::string was = stored_condition_status(job.meta.status, type);
    const std::string is = c.value("status", "");
    if (was == is || (was.empty() && is == "False")) continue;
    const std::string reason = is == "True" ? type : type + "Removed";
    event(job.meta, type == "Evicted" && is == "True" ? "Warning" : "Normal", reason,
          c.value("message", ""));
  }
}

StatusOr<std::optional<WorkloadPriority>> Reconciler::workload_priority(const JobView& job) {
  std::optional<WorkloadPriority> p = named_priority(job);
  if (!p) return p;
  kube::Resource r =
      p->kind == "PriorityClass" ? priority_class_resource() : workload_priority_class_resource();
  StatusOr<Json> object = client_->get(r, p->name);
  if (!object.ok()) return object.status();
  StatusOr<int32_t> value = priority_value(*object);
  if (!value.ok()) return value.status();
  p->value = *value;
  return p;
}

Status Reconciler::create_workload(const JobView& job, Outcome* o) {
  const std::string name = workload_name(job.meta.kind, job.meta.name);
  StatusOr<std::optional<WorkloadPriority>> priority = workload_priority(job);
  if (!priority.ok()) {
    if (priority.status().code() != StatusCode::kNotFound &&
        priority.status().code() != StatusCode::kInvalidArgument)
      return priority.status();
    std::optional<WorkloadPriority> named = named_priority(job);
    const std::string message =
        "The job names " + named->kind + " " + named->name +
        " for its Workload's priority, but it " +
        (priority.status().code() == StatusCode::kNotFound ? "does not exist"
                                                           : "has no integer value") +
        ": create it, or change the job's " +
        (named->kind == "PriorityClass" ? "podTemplate priorityClassName"
                                        : std::string("label ") + kWorkloadPriorityLabel) +
        ".";
    hold(job, "PriorityClassNotFound", message, o);
    mirror(job, nullptr, message, o);
    return Status::Ok();
  }
  kube::Resource r = workload_resource(job.meta.namespace_);
  bool made = false;
  StatusOr<Json> out =
      create_child(r, desired_workload(job, options_.pod, *priority), job.meta, &made);
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  const std::string queue = queue_name(job);
  if (made) {
    log_info("Created the job's Workload for Kueue.",
             fields(job.meta, {{"workload", name}, {"queue", queue}}));
    event(job.meta, "Normal", "WorkloadCreated",
          "Created Workload " + name + " in LocalQueue " + queue +
              "; the pods wait for Kueue to "
              "admit it.");
  }
  const std::string message =
      "Waiting for Kueue to admit Workload " + name + " (LocalQueue " + queue + ").";
  hold(job, "Queued", message, o);
  WorkloadView view = read_workload(*out);
  mirror(job, &view, message, o);
  return Status::Ok();
}

Status Reconciler::remove_workload(const ObservedJob& job, const std::string& why) {
  if (!options_.kueue) return Status::Ok();
  kube::Resource r = workload_resource(job.namespace_);
  const std::string name = workload_name(job.kind, job.name);
  std::optional<Json> have = cache_->get(r, name);
  if (!have || !owned_by(*have, job.uid) || read_workload(*have).deleting) return Status::Ok();
  Status s = client_->remove(r, name);
  if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  cache_->deleted(r, name);
  log_info("Deleted the job's Workload.", fields(job, {{"workload", name}, {"reason", why}}));
  event(job, "Normal", "WorkloadDeleted", "Deleted Workload " + name + ": " + why);
  return Status::Ok();
}

Status Reconciler::place_pods(const WorkloadView& workload, JobView* run) {
  for (RoleView& role : run->roles) {
    auto it = workload.flavors.find(role.name);
    if (it == workload.flavors.end()) continue;
    Placement placement;
    for (const std::string& flavor : it->second) {
      StatusOr<Json> f = client_->get(resource_flavor_resource(), flavor);
      if (!f.ok()) {
        if (f.status().code() != StatusCode::kNotFound) return f.status();
        return Status::FailedPrecondition("ResourceFlavor " + flavor + " of Workload " +
                                          workload.name + " does not exist; the pods of " +
                                          role.name + " wait for it");
      }
      TLT_RETURN_IF_ERROR(add_flavor(*f, &placement));
    }
    place_role(placement, &role);
  }
  return Status::Ok();
}

Status Reconciler::reconcile_workload(const JobView& job, const std::vector<Pod>& pods, Outcome* o,
                                      JobView* run) {
  kube::Resource r = workload_resource(job.meta.namespace_);
  const std::string name = workload_name(job.meta.kind, job.meta.name);
  const std::string queue = queue_name(job);
  if (queue.empty()) {  // a job that left its queue runs without Kueue, and frees its quota
    return remove_workload(
        job.meta, "the job no longer names a LocalQueue (" + std::string(kQueueNameLabel) + ")");
  }
  std::optional<Json> stored = cache_->get(r, name);
  if (stored && !owned_by(*stored, job.meta.uid)) return foreign("Workload", name);
  if (!stored) return create_workload(job, o);
  WorkloadView w = read_workload(*stored);
  const std::string waiting =
      "Waiting for Kueue to admit Workload " + name + " (LocalQueue " + queue + ")";
  auto quota_message = [&] {
    Json c = find_condition(w.conditions, "QuotaReserved");
    std::string m = c.is_object() ? c.value("message", "") : "";
    return m.empty() ? waiting + "." : waiting + ": " + m;
  };
  mirror(job, &w, waiting + ".", o);
  if (w.deleting) {
    hold(job, "WorkloadDeleted", "Workload " + name + " is being deleted; a new one follows.", o);
    return Status::Ok();
  }
  if (w.finished) {
    Json c = find_condition(w.conditions, "Finished");
    hold(job, "WorkloadFinished",
         "Kueue finished Workload " + name + " (" + c.value("reason", "") + ": " +
             c.value("message", "") + "); delete the Workload to queue the job again.",
         o);
    return Status::Ok();
  }
  if (w.evicted) {
    Json c = find_condition(w.conditions, "Evicted");
    hold(job, "Evicted",
         "Kueue evicted Workload " + name + " (" + c.value("reason", "") + ": " +
             c.value("message", "") +
             "); the pods are stopped (the trainer checkpoints) and the job waits to be admitted "
             "again.",
         o);
    if (!pods.empty() || !w.quota_reserved) return Status::Ok();  // deleting ones included
    StatusOr<Json> out = client_->patch_status(
        r, name, requeue_status(w, format_time(clock_->now())),
        stored->value("metadata", Json::object()).value("resourceVersion", ""));
    if (!out.ok()) return out.status();
    cache_->written(r, *out);
    log_info("Cleared the evicted Workload's admission; Kueue queues it again.",
             fields(job.meta, {{"workload", name}}));
    return Status::Ok();
  }
  const PodSetFit fit = compare_pod_sets(workload_pod_sets(job, options_.pod), w);
  if (fit == PodSetFit::kDifferent || (!w.admitted && w.queue != queue)) {
    const std::string why =
        fit == PodSetFit::kDifferent
            ? (w.admitted ? "the job asks for more pods, or other resources, than Kueue admitted"
                          : "the job's pods changed while it waited")
            : "the job's LocalQueue changed";
    TLT_RETURN_IF_ERROR(remove_workload(job.meta, why + "; a new Workload queues the job."));
    hold(job, "WorkloadReplaced", "Workload " + name + " is replaced: " + why + ".", o);
    return Status::Ok();
  }
  if (!w.admitted) {
    hold(job, "Queued", quota_message(), o);
    return Status::Ok();
  }
  return place_pods(w, run);
}

Status Reconciler::report_pods_ready(const JobView& job, const Outcome& o) {
  if (!kueue_managed(job) || !o.queued_reason.empty() || !o.terminal.empty()) return Status::Ok();
  kube::Resource r = workload_resource(job.meta.namespace_);
  const std::string name = workload_name(job.meta.kind, job.meta.name);
  std::optional<Json> stored = cache_->get(r, name);
  if (!stored || !owned_by(*stored, job.meta.uid)) return Status::Ok();
  WorkloadView w = read_workload(*stored);
  if (!w.admitted || w.evicted || w.finished) return Status::Ok();
  int32_t ready = 0;
  for (const auto& [role, c] : o.roles) ready += c.ready;
  const bool all = o.desired_pods > 0 && ready == o.desired_pods;
  const std::string reason = all                 ? "PodsReady"
                             : w.pods_ready_seen ? "WaitForRecovery"
                                                 : "WaitForStart";
  Json have = find_condition(w.conditions, "PodsReady");
  if (have.is_object() && have.value("status", "") == (all ? "True" : "False") &&
      (all || have.value("reason", "") == "WaitForRecovery" || reason == "WaitForStart"))
    return Status::Ok();
  const std::string message =
      std::to_string(ready) + " of " + std::to_string(o.desired_pods) + " pods running and ready.";
  StatusOr<Json> out = client_->patch_status(
      r, name, condition_status(w, "PodsReady", all, reason, message, format_time(clock_->now())),
      stored->value("metadata", Json::object()).value("resourceVersion", ""));
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  return Status::Ok();
}

Status Reconciler::finish_workload(const JobView& job, const std::string& phase,
                                   const std::string& message) {
  if (!kueue_managed(job)) return Status::Ok();
  kube::Resource r = workload_resource(job.meta.namespace_);
  const std::string name = workload_name(job.meta.kind, job.meta.name);
  std::optional<Json> stored = cache_->get(r, name);
  if (!stored || !owned_by(*stored, job.meta.uid)) return Status::Ok();
  WorkloadView w = read_workload(*stored);
  if (w.finished || w.deleting) return Status::Ok();
  StatusOr<Json> out = client_->patch_status(
      r, name,
      condition_status(w, "Finished", true, phase == "Failed" ? "Failed" : "Succeeded",
                       message.empty() ? "The job " + phase + "." : message,
                       format_time(clock_->now())),
      stored->value("metadata", Json::object()).value("resourceVersion", ""));
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  log_info("Marked the job's Workload Finished; Kueue releases its quota.",
           fields(job.meta, {{"workload", name}, {"phase", phase}}));
  return Status::Ok();
}

}  // namespace tlt::controller
