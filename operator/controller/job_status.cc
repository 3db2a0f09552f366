// Status from an outcome: phase, five conditions, counts, timestamps.
#include "operator/controller/job_status.h"

#include <algorithm>
#include <string>

#include "api/spec.h"
#include "operator/controller/trainer_world.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

const char* const kOwnedFields[] = {"phase",
                                    "observedGeneration",
                                    "conditions",
                                    "roles",
                                    "workers",
                                    "restarts",
                                    "startTime",
                                    "completionTime",
                                    "step",
                                    "reward",
                                    "loss",
                                    "evalLoss",
                                    "trainingPhase",
                                    "tokensSeen",
                                    "reclaimedGPUSeconds",
                                    "idleGPUSeconds",
                                    "drafter"};

Json counts_json(const RoleCounts& c) {
  return {{"replicas", c.replicas},
          {"ready", c.ready},
          {"succeeded", c.succeeded},
          {"failed", c.failed}};
}

std::string phase_of(const Outcome& o, int32_t ready) {
  if (!o.terminal.empty()) return o.terminal;
  if (!o.blocked_reason.empty()) return "Blocked";
  if (o.suspended) return "Suspended";
  if (!o.queued_reason.empty()) return "Queued";
  if (o.desired_pods > 0 && ready == o.desired_pods) return "Running";
  return "Pending";
}

}  // namespace

Json compute_status(const std::string& kind, const Json& old, const Outcome& o, int64_t generation,
                    WallTime now_time) {
  std::string now = format_time(now_time);
  int32_t ready = 0;
  for (const auto& [name, c] : o.roles) ready += c.ready;
  std::string phase = phase_of(o, ready);
  std::string pods =
      std::to_string(ready) + " of " + std::to_string(o.desired_pods) + " pods running and ready";

  Json conditions = Json::array();
  bool was_created = false;
  for (const Json& c : old.value("conditions", Json::array())) {
    if (c.value("type", "") == "Created" && c.value("status", "") == "True") was_created = true;
  }
  bool blocked = phase == "Blocked", queued = phase == "Queued", suspended = phase == "Suspended";
  // Held for Kueue, the job has its ConfigMap and Service but no pods (none yet, or deleted
  // on eviction) until its Workload is admitted; suspended, its pods are deleted.
  bool created = !blocked && !queued && !suspended && (o.created || was_created);
  conditions.push_back(make_condition(
      old, "Created", created,
      blocked     ? o.blocked_reason
      : queued    ? "PodsQueued"
      : suspended ? "PodsSuspended"
      : created   ? "ObjectsCreated"
                  : "Creating",
      blocked     ? o.blocked_message
      : queued    ? "The ConfigMap and the Service were created; the pods are created when "
                    "Kueue admits the job's Workload (the Running condition says what it waits "
                    "for)."
      : suspended ? "spec.suspend is true: the pods were deleted, the ConfigMap and the Service "
                    "kept; setting it false creates the pods again."
      : created   ? "The ConfigMap, the Service and the pods were created."
                  : "Creating the ConfigMap, the Service and the pods.",
      generation, now));
  std::string not_running = blocked                ? "Blocked"
                            : phase == "Suspended" ? "Suspended"
                            : phase == "Succeeded" ? "Finished"
                            : phase == "Failed"    ? "JobFailed"
                            : phase == "Queued"    ? o.queued_reason
                                                   : "PodsNotReady";
  conditions.push_back(make_condition(
      old, "Running", phase == "Running", phase == "Running" ? "AllPodsReady" : not_running,
      phase == "Queued" ? o.queued_message : pods + ".", generation, now));
  conditions.push_back(make_condition(
      old, "Suspended", phase == "Suspended",
      phase == "Suspended" ? "SuspendRequested" : "NotSuspended",
      phase == "Suspended" ? "spec.suspend is true: the pods are deleted, the job kept."
                           : "spec.suspend is false.",
      generation, now));
  bool succeeded = phase == "Succeeded", failed = phase == "Failed";
  conditions.push_back(make_condition(
      old, "Succeeded", succeeded, succeeded ? o.terminal_reason : "NotFinished",
      succeeded ? o.terminal_message : "The job has not finished.", generation, now));
  conditions.push_back(make_condition(
      old, "Failed", failed, failed ? o.terminal_reason : "NoFailure",
      failed ? o.terminal_message : std::to_string(o.restarts) + " pod failures so far.",
      generation, now));

  bool trainer_scale = false;
  if (kind == api::kRLJobKind && o.trainer_replicas > 0) {
    bool stored = false;
    for (const Json& c : old.value("conditions", Json::array()))
      stored = stored || c.value("type", "") == kTrainerScalePending;
    trainer_scale = stored || o.trainer_replicas != o.trainer_world;
    if (trainer_scale) {
      conditions.push_back(
          trainer_scale_condition(old, o.trainer_replicas, o.trainer_world, generation, now));
    }
  }
  // Conditions of other writers (the rebalancer's RebalancerDegraded, DrafterAssigned) are kept
  // as stored: a merge patch replaces the whole list.
  for (const auto& [type, c] : o.extra_conditions) conditions.push_back(c);
  for (const Json& c : old.value("conditions", Json::array())) {
    std::string type = c.value("type", "");
    if (std::any_of(o.extra_conditions.begin(), o.extra_conditions.end(),
                    [&](const auto& k) { return k.first == type; }))
      continue;
    if (type != "Created" && type != "Running" && type != "Suspended" && type != "Succeeded" &&
        type != "Failed" && !(trainer_scale && type == kTrainerScalePending))
      conditions.push_back(c);
  }

  Json status = {{"phase", phase},
                 {"observedGeneration", generation},
                 {"conditions", conditions},
                 {"restarts", o.restarts}};
  if (kind == api::kRLJobKind) {
    Json roles = Json::object();
    for (const char* r : {"rollout", "trainer", "drafter"}) {
      auto it = o.roles.find(r);
      roles[r] = counts_json(it == o.roles.end() ? RoleCounts{} : it->second);
    }
    status["roles"] = roles;
  } else {
    auto it = o.roles.find("workers");
    status["workers"] = counts_json(it == o.roles.end() ? RoleCounts{} : it->second);
  }
  std::string start = old.value("startTime", "");
  if (start.empty() && phase == "Running") start = now;
  if (!start.empty()) status["startTime"] = start;
  std::string end = old.value("completionTime", "");
  if (end.empty() && (succeeded || failed)) end = now;
  if (!end.empty()) status["completionTime"] = end;
  status.update(progress_status(kind, old, o.progress ? &*o.progress : nullptr));
  return status;
}

Json owned_status_fields(const Json& status) {
  Json out = Json::object();
  if (!status.is_object()) return out;
  for (const char* f : kOwnedFields) {
    if (status.contains(f)) out[f] = status[f];
  }
  return out;
}

bool status_changed(const Json& old, const Json& computed) {
  Json before = owned_status_fields(old);
  for (const auto& [k, v] : computed.items()) {
    if (!before.contains(k) || before[k] != v) return true;
  }
  return false;
}

Json make_condition(const Json& stored_status, const std::string& type, bool is_true,
                    const std::string& reason, const std::string& message, int64_t generation,
                    const std::string& now) {
  std::string status = is_true ? "True" : "False";
  std::string since = now;
  if (stored_status.is_object()) {
    for (const Json& c : stored_status.value("conditions", Json::array())) {
      if (c.value("type", "") == type && c.value("status", "") == status)
        since = c.value("lastTransitionTime", now);
    }
  }
  return {{"type", type},
          {"status", status},
          {"reason", reason},
          {"message", message},
          {"lastTransitionTime", since},
          {"observedGeneration", generation}};
}

Json merge_conditions(const Json& stored,
                      const std::vector<std::pair<std::string, Json>>& replace) {
  Json conditions = Json::array();
  std::vector<bool> placed(replace.size(), false);
  for (const Json& c : stored) {
    std::string type = c.value("type", "");
    size_t k = 0;
    while (k < replace.size() && (replace[k].first != type || replace[k].second.is_null())) ++k;
    if (k < replace.size() && !placed[k]) {
      placed[k] = true;
      conditions.push_back(replace[k].second);
    } else if (k == replace.size()) {
      conditions.push_back(c);
    }
  }
  for (size_t k = 0; k < replace.size(); ++k) {
    if (!placed[k] && !replace[k].second.is_null()) conditions.push_back(replace[k].second);
  }
  return conditions;
}

bool same_conditions(Json a, Json b) {
  for (Json* x : {&a, &b}) {
    for (Json& c : *x) c.erase("lastTransitionTime");
  }
  return a == b;
}

}  // namespace tlt::controller
