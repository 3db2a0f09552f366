// Drafter scaling (rebalancer.h, "Dedicated drafter pods"): what the rollout pods say about the
// drafter, the record on the RLJob, and the patch of spec.roles.drafter.replicas that adds or
// removes one dedicated drafter pod, adopts a user's edit, and the DrafterScaled condition.
#include <algorithm>
#include <optional>

#include "operator/controller/desired.h"
#include "operator/controller/job_status.h"
#include "operator/controller/kueue.h"
#include "operator/rebalancer/common.h"
#include "operator/rebalancer/rebalancer.h"

namespace tlt::rebalancer {

namespace {

std::string pods_word(int n) {
  return std::to_string(n) + (n == 1 ? " dedicated drafter pod" : " dedicated drafter pods");
}

}  // namespace

Rebalancer::DrafterRecord Rebalancer::drafter_record(const ObservedJob& job, const Json& object,
                                                     JobState* state) const {
  std::string text = object.value("metadata", Json::object())
                         .value("annotations", Json::object())
                         .value(kDrafterScalingAnnotation, std::string());
  DrafterRecord rec;
  if (text.empty()) return rec;
  Json j = Json::parse(text, nullptr, false);
  std::optional<WallTime> time;
  if (j.is_object() && j.contains("time") && j["time"].is_string())
    time = controller::parse_time(j["time"].get<std::string>());
  if (!j.is_object() || !j.contains("replicas") || !j["replicas"].is_number_integer() ||
      !j.contains("added") || !j["added"].is_number_integer() || !time) {
    if (state->bad_record != text) {
      log_warning(
          "The drafter-scaling record on the job is unreadable; every drafter pod counts "
          "as the user's.",
          fields(job, {{"annotation", kDrafterScalingAnnotation}, {"value", text}}));
      state->bad_record = text;
    }
    return rec;
  }
  rec.present = true;
  rec.replicas = j["replicas"].get<int32_t>();
  rec.added = j["added"].get<int32_t>();
  rec.action = j.value("action", "");
  rec.time = time;
  return rec;
}

Rebalancer::DrafterSignal Rebalancer::drafter_signal(const api::RLJobSpec& rl,
                                                     const std::vector<Pod>& pods,
                                                     const Utilisation& values,
                                                     const JobState& state) const {
  const api::RebalancingSpec& spec = rl.rebalancing;
  WallTime now = clock_->now();
  std::string w = std::to_string(window_of(spec).count()) + "s";
  DrafterSignal out;
  bool all_busy = !pods.empty();
  double lowest = 1.0;
  for (const Pod& p : pods) {
    auto ps = state.pods.find(p.name);
    bool assigned = ps != state.pods.end() ? ps->second.assigned : p.assigned;
    auto v = values.find(p.name);
    if (assigned) {
      out.idle = true;
      out.why = "rollout pod " + p.name + " is assigned to drafter training";
      all_busy = false;
      continue;
    }
    if (v == values.end() || ps == state.pods.end() || now < ps->second.hold_until) {
      all_busy = false;  // not a whole window of data about this pod yet
      continue;
    }
    lowest = std::min(lowest, v->second.second);
    if (v->second.second <= 1 - spec.idle_below) all_busy = false;
    if (v->second.first < spec.idle_below && !out.idle) {
      out.idle = true;
      out.why = "rollout pod " + p.name + " stayed below " + ratio(spec.idle_below) + " for " + w;
    }
  }
  if (!rl.drafter.training.enabled) {
    out.idle = true;
    out.why = "drafter training is off (spec.drafter.training.enabled)";
    return out;
  }
  out.starving = all_busy;
  if (out.starving) {
    out.why = "no rollout pod was idle or assigned for " + w + ": every one stayed above " +
              ratio(1 - spec.idle_below) + " busy (lowest " + ratio(lowest) +
              "), so only dedicated pods can train the drafter";
  }
  return out;
}

Json Rebalancer::scale_drafters(const ObservedJob& job, const Json& object,
                                const api::RLJobSpec& rl, const std::vector<Pod>& pods,
                                const Utilisation& values, JobState* state) {
  const api::DrafterRoleSpec& role = rl.roles.drafter;
  WallTime now = clock_->now();
  DrafterRecord rec = drafter_record(job, object, state);
  int32_t replicas = role.replicas;
  // A user's edit (or a record that does not match for another reason): adopt, do not fight.
  if (rec.present && rec.replicas != replicas) return adopt_drafter_replicas(job, object, rec, rl);

  int32_t added =
      rec.present ? std::clamp(rec.added, 0, std::max(0, replicas - role.min_replicas)) : 0;
  DrafterSignal sig = drafter_signal(rl, pods, values, *state);
  bool may_change = !rec.time || now >= *rec.time + window_of(rl.rebalancing);
  int32_t want = replicas;
  if (sig.starving && replicas < role.max_replicas && may_change) {
    want = replicas + 1;
  } else if (!sig.starving && sig.idle && added > 0 && replicas > role.min_replicas && may_change) {
    want = replicas - 1;
  }
  // Kueue: a pod beyond the admitted drafter count would use quota the job was not given.
  const std::optional<int32_t> quota = admitted_drafters(job, object);
  const bool over_quota =
      quota && sig.starving && replicas < role.max_replicas && replicas + 1 > *quota;
  if (over_quota) {
    want = std::min(want, replicas);
    if (!state->over_quota) {
      const std::string workload = controller::workload_name(job.kind, job.name);
      log_info("The drafter starves but Kueue admitted no more dedicated drafter pods.",
               fields(job, {{"replicas", std::to_string(replicas)},
                            {"admitted", std::to_string(*quota)}}));
      event(job, "Warning", "DrafterQuotaExceeded",
            "The drafter starves (" + sig.why + ") but Workload " + workload + " was admitted " +
                "with " + std::to_string(*quota) + " drafter pods and " + std::to_string(replicas) +
                " run: no pod is added beyond the job's quota. " +
                "Raise spec.roles.drafter.replicas (the job queues again for the larger quota).");
    }
  }
  state->over_quota = over_quota;
  bool capped = sig.starving && replicas >= role.max_replicas;
  if (capped && !state->capped) {
    log_info("The drafter starves but the job is at maxReplicas dedicated drafter pods.",
             fields(job, {{"replicas", std::to_string(replicas)},
                          {"maxReplicas", std::to_string(role.max_replicas)}}));
  }
  state->capped = capped;
  if (want != replicas) {
    DrafterRecord next{true, want, added + (want > replicas ? 1 : -1),
                       want > replicas ? "add" : "remove", now};
    if (!change_drafter_replicas(job, object, rl, sig, replicas, next)) {
      for (const Json& c : job.status.value("conditions", Json::array())) {
        if (c.value("type", "") == kDrafterScaledCondition) return c;  // as it is
      }
      return Json();
    }
    rec = next;
  }
  if (over_quota) {
    return controller::make_condition(
        job.status, kDrafterScaledCondition, true, "AdmittedQuotaReached",
        "The drafter starves (" + sig.why + ") but Kueue admitted " + std::to_string(*quota) +
            " dedicated drafter pods: no pod is added.",
        job.generation, controller::format_time(clock_->now()));
  }
  return drafter_condition(job, rl, sig, rec, capped);
}

std::optional<int32_t> Rebalancer::admitted_drafters(const ObservedJob& job,
                                                     const Json& object) const {
  const controller::ObjectStore* store = cache_->store("workloads");
  const Json labels = object.value("metadata", Json::object()).value("labels", Json::object());
  if (!store || !labels.is_object() || !labels.contains(controller::kQueueNameLabel))
    return std::nullopt;
  std::optional<Json> w = store->get(job.namespace_, controller::workload_name(job.kind, job.name));
  if (!w || !controller::owned_by(*w, job.uid)) return 0;
  controller::WorkloadView view = controller::read_workload(*w);
  if (!view.admitted) return 0;
  auto it = view.admitted_counts.find("drafter");
  return it == view.admitted_counts.end() ? 0 : it->second;
}

Json Rebalancer::adopt_drafter_replicas(const ObservedJob& job, const Json& object,
                                        const DrafterRecord& rec, const api::RLJobSpec& rl) {
  int32_t replicas = rl.roles.drafter.replicas;
  DrafterRecord adopted{true, replicas, 0, "adopt", clock_->now()};
  Status s = write_drafter_replicas(job, object, replicas, adopted);
  if (!s.ok()) {
    log_error("Could not record the adopted drafter replicas; trying again next interval.",
              fields(job, {{"action", "adopt"}, {"error", s.to_string()}}));
    return Json();  // the stored condition stays
  }
  std::string message = "spec.roles.drafter.replicas was changed to " + std::to_string(replicas) +
                        " (the rebalancer had set " + std::to_string(rec.replicas) +
                        "): the rebalancer keeps it as the user's count and removes only pods it "
                        "adds from now on.";
  log_info("Adopted a user's edit of the drafter replicas.",
           fields(job, {{"replicas", std::to_string(replicas)},
                        {"was", std::to_string(rec.replicas)},
                        {"action", "adopt"}}));
  event(job, "Normal", "DrafterReplicasAdopted", message);
  return drafter_condition(job, rl, DrafterSignal{}, adopted, false);
}

bool Rebalancer::change_drafter_replicas(const ObservedJob& job, const Json& object,
                                         const api::RLJobSpec& rl, const DrafterSignal& sig,
                                         int32_t was, const DrafterRecord& next) {
  const api::DrafterRoleSpec& role = rl.roles.drafter;
  bool add = next.replicas > was;
  std::string action = add ? "add_drafter" : "remove_drafter";
  Status s = write_drafter_replicas(job, object, next.replicas, next);
  if (!s.ok()) {
    log_error(
        "Could not change the job's drafter replicas; the decision waits for the next "
        "interval.",
        fields(job, {{"action", action}, {"error", s.to_string()}}));
    return false;
  }
  std::string pod = controller::pod_name(job.name, "drafter", add ? was : next.replicas);
  std::string message = (add ? "Added dedicated drafter pod " : "Removed dedicated drafter pod ") +
                        pod + ": " + sig.why + ". spec.roles.drafter.replicas " +
                        std::to_string(was) + " -> " + std::to_string(next.replicas) +
                        " (minReplicas " + std::to_string(role.min_replicas) + ", maxReplicas " +
                        std::to_string(role.max_replicas) + ").";
  log_info(add ? "Added a dedicated drafter pod: the drafter starves."
               : "Removed a dedicated drafter pod the rebalancer had added: rollout pods are "
                 "idle again.",
           fields(job, {{"pod", pod},
                        {"action", action},
                        {"replicas", std::to_string(next.replicas)},
                        {"was", std::to_string(was)},
                        {"added", std::to_string(next.added)}}));
  event(job, "Normal", add ? "DrafterPodAdded" : "DrafterPodRemoved", message);
  metrics_->add_rebalancer_decision(job.namespace_, job.name, action);
  return true;
}

Json Rebalancer::drafter_condition(const ObservedJob& job, const api::RLJobSpec& rl,
                                   const DrafterSignal& sig, const DrafterRecord& rec,
                                   bool capped) const {
  const api::DrafterRoleSpec& role = rl.roles.drafter;
  int32_t replicas = rec.present ? rec.replicas : role.replicas;
  int32_t added =
      rec.present ? std::clamp(rec.added, 0, std::max(0, replicas - role.min_replicas)) : 0;
  std::string counts = "spec.roles.drafter.replicas is " + std::to_string(replicas) + ", " +
                       std::to_string(replicas - added) + " of them the user's (minReplicas " +
                       std::to_string(role.min_replicas) + ", maxReplicas " +
                       std::to_string(role.max_replicas) + ")";
  bool is_true = added > 0 || capped;
  std::string reason = "NoDrafterPodsAdded", message;
  if (capped) {
    reason = "MaxReplicasReached";
    message = "The drafter starves (" + sig.why + ") but " + counts + ": no pod is added.";
  } else if (added > 0) {
    reason = rec.action == "remove" ? "DrafterPodRemoved" : "DrafterPodAdded";
    message = pods_word(added) + " added by the rebalancer run; " + counts + ".";
  } else if (rec.present && rec.action == "remove") {
    reason = "DrafterPodRemoved";
    message = "The rebalancer removed the dedicated drafter pods it had added; " + counts + ".";
  } else if (rec.present && rec.action == "adopt") {
    reason = "DrafterReplicasAdopted";
    message = "A user set spec.roles.drafter.replicas; the rebalancer added no pod since; " +
              counts + ".";
  } else {
    message = "No dedicated drafter pod added by the rebalancer; " + counts + ".";
  }
  return controller::make_condition(job.status, kDrafterScaledCondition, is_true, reason, message,
                                    job.generation, controller::format_time(clock_->now()));
}

Status Rebalancer::write_drafter_replicas(const ObservedJob& job, const Json& listed,
                                          int32_t replicas, const DrafterRecord& record) {
  kube::Resource r = controller::job_resource(job.kind, job.namespace_);
  StatusOr<Json> fresh = kube_->get(r, job.name);
  if (!fresh.ok()) return fresh.status();
  auto drafter_replicas = [](const Json& o) {
    const Json& spec = o.value("spec", Json::object());
    return spec.value("roles", Json::object())
        .value("drafter", Json::object())
        .value("replicas", 0);
  };
  auto annotation = [](const Json& o) {
    return o.value("metadata", Json::object())
        .value("annotations", Json::object())
        .value(kDrafterScalingAnnotation, std::string());
  };
  if (drafter_replicas(*fresh) != drafter_replicas(listed) ||
      annotation(*fresh) != annotation(listed))
    return Status::Aborted("the job's drafter replicas changed since it was listed");
  Json value = {{"replicas", record.replicas},
                {"added", record.added},
                {"action", record.action},
                {"time", controller::format_time(record.time.value_or(clock_->now()))}};
  Json patch = {{"metadata",
                 {{"resourceVersion", (*fresh)["metadata"].value("resourceVersion", "")},
                  {"annotations", {{kDrafterScalingAnnotation, value.dump()}}}}}};
  if (replicas != drafter_replicas(listed))
    patch["spec"] = {{"roles", {{"drafter", {{"replicas", replicas}}}}}};
  StatusOr<Json> out = kube_->patch(r, job.name, patch);
  if (out.ok()) cache_->written(r, *out);
  return out.ok() ? Status::Ok() : out.status();
}

}  // namespace tlt::rebalancer
