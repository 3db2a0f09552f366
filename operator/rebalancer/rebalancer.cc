// The rebalancer's pass over its jobs (rebalancer.h): which jobs to look at, the Prometheus URL
// and queries, degradation, and the conditions it writes. Pod assignment is in
// pod_assignment.cc, drafter scaling in drafter_scaling.cc, the queries in promql.cc.
#include "operator/rebalancer/rebalancer.h"

#include <algorithm>
#include <set>

#include "api/manifest.h"
#include "operator/controller/desired.h"
#include "operator/controller/job_status.h"
#include "operator/controller/log.h"
#include "operator/rebalancer/common.h"

namespace tlt::rebalancer {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

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
  std::set<std::pair<std::string, std::string>> live;  // every RLJob, for its metric series
  for (const Json& object :
       cache_->list(controller::job_resource(api::kRLJobKind, options_.namespace_))) {
    ObservedJob job = controller::observe_job(api::kRLJobKind, object);
    std::string key = job.namespace_ + "/" + job.name;
    live.insert({job.namespace_, job.name});
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
  metrics_->retain_rebalancer_jobs(live);  // a deleted job's series go; a finished one's stay
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(next - now));
}

StatusOr<Utilisation> Rebalancer::utilisation(const ObservedJob& job,
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
  return read_utilisation(q, *idle, *busy);
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
  Json conditions = controller::merge_conditions(old, replace);
  if (controller::same_conditions(old, conditions)) return;
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
