// Idle rollout pods -> drafter training, from Prometheus utilisation, with hysteresis.
#include "operator/rebalancer/rebalancer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "api/manifest.h"
#include "operator/controller/desired.h"
#include "operator/controller/job_status.h"
#include "operator/controller/log.h"

namespace tlt::rebalancer {

using controller::log_error;
using controller::log_info;
using controller::log_warning;
using controller::LogFields;
using controller::ObservedJob;
using controller::WallTime;
using Json = nlohmann::json;
using std::chrono::seconds;

namespace {

seconds window_of(const api::RebalancingSpec& spec) {
  return seconds(std::max<int64_t>(1, std::llround(spec.window.seconds)));
}
seconds interval_of(const api::RebalancingSpec& spec) {
  return seconds(std::max<int64_t>(1, std::llround(spec.interval.seconds)));
}

// A name as a PromQL regex (names are DNS subdomains: only '.' is special) inside a string
// literal, where the backslash itself must be escaped.
std::string regex_literal(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '.' ? std::string("\\\\.") : std::string(1, c);
  return out;
}

std::string ratio(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

LogFields fields(const ObservedJob& job, LogFields more) {
  LogFields f = {{"job", job.namespace_ + "/" + job.name}};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string pods_word(int n) {
  return std::to_string(n) + (n == 1 ? " dedicated drafter pod" : " dedicated drafter pods");
}

}  // namespace

UtilisationQueries utilisation_queries(const api::RebalancingSpec& spec,
                                       const std::string& namespace_, const std::string& job) {
  UtilisationQueries q;
  q.pod_label = spec.pod_label.empty() ? "pod" : spec.pod_label;
  std::string pods = q.pod_label + "=~\"" + regex_literal(job) + "-rollout-[0-9]+\"";
  std::string sel;
  if (spec.metric.rfind("DCGM_", 0) == 0) {
    std::string ns_label = q.pod_label == "exported_pod" ? "exported_namespace" : "namespace";
    sel = "{" + ns_label + "=\"" + namespace_ + "\"," + pods + "}";
    q.scale = spec.metric == "DCGM_FI_DEV_GPU_UTIL" ? 0.01 : 1.0;
  } else {
    sel = "{job=\"" + job + "\"," + pods + "}";
  }
  std::string range = "[" + std::to_string(window_of(spec).count()) + "s]";
  q.idle = "max by (" + q.pod_label + ") (max_over_time(" + spec.metric + sel + range + "))";
  q.busy = "max by (" + q.pod_label + ") (min_over_time(" + spec.metric + sel + range + "))";
  return q;
}

Rebalancer::Rebalancer(kube::KubeClient* kube, const controller::Cache* cache,
                       PrometheusClient* prometheus, const controller::Clock* clock,
                       controller::OperatorMetrics* metrics, RebalancerOptions options)
    : kube_(kube),
      cache_(cache),
      prometheus_(prometheus),
      clock_(clock),
      metrics_(metrics),
      options_(std::move(options)) {}

std::chrono::milliseconds Rebalancer::tick() {
  using std::chrono::milliseconds;
  WallTime now = clock_->now();
  WallTime next = now + options_.discovery;
  std::map<std::string, JobState> kept;
  for (const Json& object :
       cache_->list(controller::job_resource(api::kRLJobKind, options_.namespace_))) {
    ObservedJob job = controller::observe_job(api::kRLJobKind, object);
    std::string key = job.namespace_ + "/" + job.name;
    std::string phase = job.status.value("phase", "");
    if (job.deleting || phase == "Suspended" || phase == "Succeeded" || phase == "Failed") continue;
    StatusOr<api::Job> decoded = api::parse_job_json(object);
    if (!decoded.ok()) continue;  // the reconciler reports an invalid spec
    const api::RLJob* rljob = std::get_if<api::RLJob>(&*decoded);
    if (rljob == nullptr || !rljob->spec.rebalancing.enabled) continue;
    const api::RebalancingSpec& spec = rljob->spec.rebalancing;
    JobState state = jobs_.count(key) ? std::move(jobs_[key]) : JobState{};
    if (state.uid != job.uid) {
      state = JobState{};
      state.uid = job.uid;
      // Every decision series at 0 from the first look: an increase() over the window of a
      // decision then reads 1, not nothing (a series born at 1 has no earlier sample).
      metrics_->declare_rebalancer_job(job.namespace_, job.name);
      // After a restart: no second Warning Event for a degradation already reported.
      for (const Json& c : job.status.value("conditions", Json::array())) {
        if (c.value("type", "") == kDegradedCondition)
          state.degraded = c.value("status", "") == "True";
      }
    }
    if (!state.looked || now >= state.next_look) {
      state.looked = true;
      state.next_look = now + interval_of(spec);
      rebalance(job, object, rljob->spec, &state);
    }
    next = std::min(next, state.next_look);
    kept[key] = std::move(state);
  }
  jobs_ = std::move(kept);  // forgets jobs that are gone, disabled or finished
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(next - now));
}

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

StatusOr<Rebalancer::Utilisation> Rebalancer::utilisation(const ObservedJob& job,
                                                          const api::RebalancingSpec& spec,
                                                          const std::string& url) {
  if (url.empty()) {
    return Status::FailedPrecondition(
        "no Prometheus URL: set spec.rebalancing.prometheusURL (or the operator's "
        "--prometheus-url)");
  }
  UtilisationQueries q = utilisation_queries(spec, job.namespace_, job.name);
  StatusOr<std::vector<Sample>> idle = prometheus_->query(url, q.idle);
  if (!idle.ok()) return idle.status();
  StatusOr<std::vector<Sample>> busy = prometheus_->query(url, q.busy);
  if (!busy.ok()) return busy.status();
  Utilisation out;
  std::map<std::string, int> seen;  // 1 idle, 2 busy
  for (const auto& [samples, which] : {std::make_pair(&*idle, 1), std::make_pair(&*busy, 2)}) {
    for (const Sample& s : *samples) {
      auto it = s.labels.find(q.pod_label);
      if (it == s.labels.end()) continue;
      (which == 1 ? out[it->second].first : out[it->second].second) = s.value * q.scale;
      seen[it->second] |= which;
    }
  }
  for (auto it = out.begin(); it != out.end();) {  // only pods both queries know
    it = seen[it->first] == 3 ? std::next(it) : out.erase(it);
  }
  return out;
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

void Rebalancer::rebalance(const ObservedJob& job, const Json& object, const api::RLJobSpec& rl,
                           JobState* state) {
  const api::RebalancingSpec& spec = rl.rebalancing;
  WallTime now = clock_->now();
  StatusOr<std::vector<Pod>> pods = running_rollout_pods(job);
  if (!pods.ok()) {
    log_error("Listing the job's rollout pods failed; no rebalancing this interval.",
              fields(job, {{"error", pods.status().to_string()}}));
    return;
  }
  std::map<std::string, PodState> known;
  for (const Pod& p : *pods) {
    auto it = state->pods.find(p.name);
    PodState ps =
        it != state->pods.end() ? it->second : PodState{p.assigned, now + window_of(spec)};
    ps.assigned = p.assigned;
    known[p.name] = ps;
  }
  state->pods = std::move(known);

  std::string url = prometheus_url_for(job, spec.prometheus_url, state);
  if (url.empty() && !spec.prometheus_url.empty()) {
    degraded(job, "(none)",
             Status::FailedPrecondition(
                 "spec.rebalancing.prometheusURL \"" + spec.prometheus_url +
                 "\" is not in the operator's allow-list (--prometheus-url-allow, Helm "
                 "prometheus.allowedURLs) and the operator has no --prometheus-url: ask the "
                 "cluster admin to allow it"),
             state, "PrometheusURLNotAllowed");
    return;
  }
  auto values = utilisation(job, spec, url);
  if (!values.ok()) {
    degraded(job, url, values.status(), state, "PrometheusQueryFailed");
    return;
  }
  if (state->degraded) {
    // Prometheus may have been down (and not scraping) too: each later decision must rest on a
    // full window of data from now on.
    for (auto& [name, ps] : state->pods)
      ps.hold_until = std::max(ps.hold_until, now + window_of(spec));
    log_info("Prometheus queries work again; rebalancing resumes after a window.",
             fields(job, {{"prometheus", url}}));
    event(job, "Normal", "RebalancerRecovered", "Prometheus at " + url + " answers again.");
    state->degraded = false;
  }
  for (const Decision& d : decide(spec, *pods, *values, state)) {
    if (!apply(job, spec, d)) continue;
    state->pods[d.pod].assigned = d.assign;
    state->pods[d.pod].hold_until = now + window_of(spec);
  }
  Json scaled = scale_drafters(job, object, rl, *pods, *values, state);
  std::vector<std::string> assigned;
  for (const auto& [name, ps] : state->pods) {
    if (ps.assigned) assigned.push_back(name);
  }
  std::string at = controller::format_time(now);
  Json deg =
      controller::make_condition(job.status, kDegradedCondition, false, "QueriesSucceeded",
                                 "Utilisation queries to " + url + " succeed.", job.generation, at);
  Json asg = controller::make_condition(
      job.status, kAssignedCondition, !assigned.empty(),
      assigned.empty() ? "NoIdlePods" : "IdlePodsAssigned",
      assigned.empty() ? "No rollout pod is assigned to drafter training."
                       : std::to_string(assigned.size()) +
                             " idle rollout pods train the drafter: " + join(assigned) + ".",
      job.generation, at);
  write_conditions(
      job,
      {{kDegradedCondition, deg}, {kAssignedCondition, asg}, {kDrafterScaledCondition, scaled}});
}

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
  return drafter_condition(job, rl, sig, rec, capped);
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

bool prometheus_url_allowed(const std::string& url, const std::vector<std::string>& allowed) {
  for (std::string a : allowed) {
    while (!a.empty() && a.back() == '/') a.pop_back();
    if (a.empty()) continue;
    if (url == a || url.rfind(a + "/", 0) == 0) return true;
  }
  return false;
}

std::string Rebalancer::prometheus_url_for(const ObservedJob& job, const std::string& spec_url,
                                           JobState* state) {
  if (spec_url.empty() || prometheus_url_allowed(spec_url, options_.allowed_prometheus_urls))
    return spec_url.empty() ? options_.prometheus_url : spec_url;
  if (state->refused_url != spec_url) {  // once per URL, not per interval
    state->refused_url = spec_url;
    std::string message =
        "spec.rebalancing.prometheusURL \"" + spec_url +
        "\" is not in the operator's allow-list (--prometheus-url-allow); " +
        (options_.prometheus_url.empty() ? std::string("no utilisation queries are made")
                                         : "the operator's --prometheus-url is queried instead");
    log_warning("A job's Prometheus URL is not allowed; it is not queried.",
                fields(job, {{"prometheus", spec_url}}));
    event(job, "Warning", "PrometheusURLNotAllowed", message);
  }
  return options_.prometheus_url;
}

void Rebalancer::degraded(const ObservedJob& job, const std::string& url, const Status& why,
                          JobState* state, const std::string& reason) {
  WallTime now = clock_->now();
  metrics_->add_prometheus_query_error();
  std::string message = "Utilisation queries fail, so no pod is reassigned: " + why.to_string();
  log_error(
      "Prometheus query failed; no reassignment until it works.",
      fields(job, {{"prometheus", url.empty() ? "(none)" : url}, {"error", why.to_string()}}));
  if (!state->degraded) {
    event(job, "Warning", kDegradedCondition, message);
    state->degraded = true;
  }
  // DrafterAssigned and DrafterScaled are kept as stored: nothing changed.
  Json deg = controller::make_condition(job.status, kDegradedCondition, true, reason, message,
                                        job.generation, controller::format_time(now));
  write_conditions(job, {{kDegradedCondition, deg}});
}

void Rebalancer::write_conditions(const ObservedJob& listed,
                                  const std::vector<std::pair<std::string, Json>>& replace) {
  // Read the job again: the reconciler may have written its conditions since the list.
  StatusOr<Json> fresh =
      kube_->get(controller::job_resource(listed.kind, listed.namespace_), listed.name);
  if (!fresh.ok()) {
    log_error("Could not read the job to update its conditions.",
              fields(listed, {{"error", fresh.status().to_string()}}));
    return;
  }
  ObservedJob job = controller::observe_job(listed.kind, *fresh);
  Json old = job.status.value("conditions", Json::array());
  Json conditions = Json::array();
  std::vector<bool> placed(replace.size(), false);
  for (const Json& c : old) {
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
  auto same = [](Json a, Json b) {  // lastTransitionTime aside (kept while status is unchanged)
    for (Json* x : {&a, &b}) {
      for (Json& c : *x) c.erase("lastTransitionTime");
    }
    return a == b;
  };
  if (same(old, conditions)) return;
  StatusOr<Json> out = kube_->patch_status(controller::job_resource(job.kind, job.namespace_),
                                           job.name, {{"conditions", conditions}});
  if (!out.ok()) {
    log_error("Could not write the rebalancer's conditions.",
              fields(job, {{"error", out.status().to_string()}}));
  }
}

void Rebalancer::event(const ObservedJob& job, const std::string& type, const std::string& reason,
                       const std::string& message) {
  Json e = controller::event_object(job, type, reason, message, "tlt-operator-rebalancer",
                                    controller::format_time(clock_->now()));
  StatusOr<Json> out = kube_->create(controller::event_resource(job.namespace_), e);
  if (!out.ok()) {
    log_error("Could not record an Event (the decision stands).",
              fields(job, {{"reason", reason}, {"error", out.status().to_string()}}));
  }
}

}  // namespace tlt::rebalancer
