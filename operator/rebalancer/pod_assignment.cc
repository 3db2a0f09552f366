// Pod assignment (rebalancer.h, top): which running rollout pods are idle or needed back, and
// the annotation, Event, metric and log line of each decision.
#include <algorithm>
#include <cstdlib>

#include "operator/controller/desired.h"
#include "operator/rebalancer/common.h"
#include "operator/rebalancer/rebalancer.h"

namespace tlt::rebalancer {

StatusOr<std::vector<Rebalancer::Pod>> Rebalancer::running_rollout_pods(const ObservedJob& job) {
  std::vector<Pod> pods;
  for (const Json& p : cache_->by_job(controller::pod_resource(job.namespace_), job.name)) {
    const Json& meta = p["metadata"];
    if (meta.value("labels", Json::object()).value(controller::kRoleLabel, "") != "rollout")
      continue;
    if (!controller::owned_by(p, job.uid) || meta.contains("deletionTimestamp")) continue;
    if (!p.contains("status") || p["status"].value("phase", "") != "Running") continue;
    Pod pod;
    pod.name = meta.value("name", "");
    std::string index = meta.value("labels", Json::object()).value(controller::kIndexLabel, "");
    pod.index = std::atoi(index.c_str());
    pod.assigned = meta.value("annotations", Json::object()).value(kAssignmentAnnotation, "") ==
                   kAssignedToDrafter;
    pods.push_back(pod);
  }
  return pods;
}

std::vector<Rebalancer::Decision> Rebalancer::decide(const api::RebalancingSpec& spec,
                                                     const std::vector<Pod>& pods,
                                                     const Utilisation& values, JobState* state) {
  WallTime now = clock_->now();
  int unassigned = 0;
  for (const Pod& p : pods) unassigned += !p.assigned;
  std::vector<Decision> out;
  // Rollout capacity: the lowest utilisation over the window among the pods still generating.
  // An assigned pod's own utilisation says nothing (it is busy training the drafter).
  double capacity = -1;
  for (const Pod& p : pods) {
    auto v = values.find(p.name);
    if (p.assigned || v == values.end()) continue;
    capacity = capacity < 0 ? v->second.second : std::min(capacity, v->second.second);
  }
  bool returned_one = false;
  std::vector<const Pod*> idle;
  for (const Pod& p : pods) {
    const PodState& ps = state->pods[p.name];
    auto v = values.find(p.name);
    if (now < ps.hold_until || v == values.end()) continue;
    if (p.assigned && !returned_one && capacity > 1 - spec.idle_below) {
      out.push_back({p.name, false, capacity});  // one per pass: the lowest index
      returned_one = true;
    } else if (!p.assigned && v->second.first < spec.idle_below) {
      idle.push_back(&p);
    }
  }
  std::sort(idle.begin(), idle.end(),
            [](const Pod* a, const Pod* b) { return a->index > b->index; });
  for (const Pod* p : idle) {
    if (unassigned - 1 < spec.min_rollout_replicas) {
      log_info("An idle rollout pod stays in rollout: minRolloutReplicas would be broken.",
               {{"pod", p->name},
                {"idle", ratio(values.at(p->name).first)},
                {"unassignedRollout", std::to_string(unassigned)},
                {"minRolloutReplicas", std::to_string(spec.min_rollout_replicas)}});
      continue;
    }
    --unassigned;
    out.push_back({p->name, true, values.at(p->name).first});
  }
  return out;
}

bool Rebalancer::apply(const ObservedJob& job, const api::RebalancingSpec& spec,
                       const Decision& d) {
  Json value = d.assign ? Json(kAssignedToDrafter) : Json(nullptr);
  Json patch = {{"metadata", {{"annotations", {{kAssignmentAnnotation, value}}}}}};
  StatusOr<Json> out = kube_->patch(controller::pod_resource(job.namespace_), d.pod, patch);
  std::string action = d.assign ? "assign_drafter" : "return_rollout";
  if (!out.ok()) {
    log_error(
        "Could not annotate the pod; the decision waits for the next interval.",
        fields(job, {{"pod", d.pod}, {"action", action}, {"error", out.status().to_string()}}));
    return false;
  }
  cache_->written(controller::pod_resource(job.namespace_), *out);  // the next tick sees it
  std::string w = std::to_string(window_of(spec).count()) + "s";
  std::string message =
      d.assign ? "Pod " + d.pod + " trains the drafter: its GPU utilisation stayed below " +
                     ratio(spec.idle_below) + " for " + w + " (highest " + ratio(d.value) + ")."
               : "Pod " + d.pod + " returns to rollout: the job's other rollout pods stayed " +
                     "above " + ratio(1 - spec.idle_below) + " busy for " + w + " (lowest " +
                     ratio(d.value) + "): rollout capacity is short.";
  log_info(
      d.assign ? "Assigned an idle rollout pod to drafter training."
               : "Returned a drafter pod to rollout: the rollout pods are saturated.",
      fields(job, {{"pod", d.pod}, {"action", action}, {"value", ratio(d.value)}, {"window", w}}));
  event(job, "Normal", d.assign ? "PodAssignedToDrafter" : "PodReturnedToRollout", message);
  metrics_->add_rebalancer_decision(job.namespace_, job.name, action);
  return true;
}

}  // namespace tlt::rebalancer
