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

Rebalancer::Rebalancer(kube::KubeClient* kube, PrometheusClient* prometheus,
                       const controller::Clock* clock, controller::OperatorMetrics* metrics,
                       RebalancerOptions options)
    : kube_(kube),
      prometheus_(prometheus),
      clock_(clock),
      metrics_(metrics),
      options_(std::move(options)) {}

std::chrono::milliseconds Rebalancer::tick() {
  using std::chrono::milliseconds;
  WallTime now = clock_->now();
  kube::ListOptions lo;
  StatusOr<kube::ObjectList> list =
      kube_->list(controller::job_resource(api::kRLJobKind, options_.namespace_), lo);
  if (!list.ok()) {
    log_error("Listing RLJobs failed; the rebalancer tries again later.",
              {{"error", list.status().to_string()}});
    return std::chrono::duration_cast<milliseconds>(options_.discovery);
  }
  WallTime next = now + options_.discovery;
  std::map<std::string, JobState> kept;
  for (const Json& object : list->items) {
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
      // After a restart: no second Warning Event for a degradation already reported.
      for (const Json& c : job.status.value("conditions", Json::array())) {
        if (c.value("type", "") == kDegradedCondition)
          state.degraded = c.value("status", "") == "True";
      }
    }
    if (!state.looked || now >= state.next_look) {
      state.looked = true;
      state.next_look = now + interval_of(spec);
      rebalance(job, spec, &state);
    }
    next = std::min(next, state.next_look);
    kept[key] = std::move(state);
  }
  jobs_ = std::move(kept);  // forgets jobs that are gone, disabled or finished
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(next - now));
}

StatusOr<std::vector<Rebalancer::Pod>> Rebalancer::running_rollout_pods(const ObservedJob& job) {
  kube::ListOptions lo;
  lo.label_selector =
      controller::pod_selector(job.name) + "," + controller::kRoleLabel + "=rollout";
  StatusOr<kube::ObjectList> list = kube_->list(controller::pod_resource(job.namespace_), lo);
  if (!list.ok()) return list.status();
  std::vector<Pod> pods;
  for (const Json& p : list->items) {
    const Json& meta = p["metadata"];
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

StatusOr<std::map<std::string, std::pair<double, double>>> Rebalancer::utilisation(
    const ObservedJob& job, const api::RebalancingSpec& spec, const std::string& url) {
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
  std::map<std::string, std::pair<double, double>> out;
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

std::vector<Rebalancer::Decision> Rebalancer::decide(
    const api::RebalancingSpec& spec, const std::vector<Pod>& pods,
    const std::map<std::string, std::pair<double, double>>& values, JobState* state) {
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

void Rebalancer::rebalance(const ObservedJob& job, const api::RebalancingSpec& spec,
                           JobState* state) {
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

  std::string url = options_.prometheus_url.empty() ? spec.prometheus_url : options_.prometheus_url;
  auto values = utilisation(job, spec, url);
  if (!values.ok()) {
    degraded(job, url, values.status(), state);
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
  write_conditions(job, deg, asg);
}

void Rebalancer::degraded(const ObservedJob& job, const std::string& url, const Status& why,
                          JobState* state) {
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
  // DrafterAssigned is kept as stored: nothing changed.
  Json asg;
  if (job.status.is_object()) {
    for (const Json& c : job.status.value("conditions", Json::array())) {
      if (c.value("type", "") == kAssignedCondition) asg = c;
    }
  }
  Json deg =
      controller::make_condition(job.status, kDegradedCondition, true, "PrometheusQueryFailed",
                                 message, job.generation, controller::format_time(now));
  write_conditions(job, deg, asg);
}

void Rebalancer::write_conditions(const ObservedJob& listed, const Json& degraded,
                                  const Json& assigned) {
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
  bool have_deg = false, have_asg = false;
  for (const Json& c : old) {
    std::string type = c.value("type", "");
    if (type == kDegradedCondition) {
      have_deg = true;
      conditions.push_back(degraded);
    } else if (type == kAssignedCondition && !assigned.is_null()) {
      have_asg = true;
      conditions.push_back(assigned);
    } else {
      conditions.push_back(c);
    }
  }
  if (!have_deg) conditions.push_back(degraded);
  if (!have_asg && !assigned.is_null()) conditions.push_back(assigned);
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
