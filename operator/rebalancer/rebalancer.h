// The rebalancer: turns rollout pods whose GPU sat idle into drafter trainers, and back.
//
// Every spec.rebalancing.interval, for each RLJob with spec.rebalancing.enabled that is not
// Suspended, Succeeded or Failed, it asks Prometheus two instant queries about the job's running
// rollout pods (W = spec.rebalancing.window in seconds, L = spec.rebalancing.podLabel):
//   idle  max by (L) (max_over_time(M{sel}[Ws]))   the pod's highest utilisation over W
//   busy  max by (L) (min_over_time(M{sel}[Ws]))   the pod's lowest utilisation over W
// (utilisation_queries() below has the selectors). A pod is
//   assigned  when idle < idleBelow: it stayed below the threshold for the whole window;
//   returned  when every unassigned rollout pod's busy > 1 - idleBelow: the pods still
//             generating were saturated for the whole window, so rollout capacity is short
//             (one pod per pass, the lowest index). An assigned pod's own utilisation is no
//             signal: it is busy training the drafter.
// max/min_over_time rather than avg_over_time: an average below 0.05 over 60 s also holds for a
// pod that was fully busy for 3 of those seconds, which is not "idle for the whole window".
//
// Hysteresis: no decision is made about a pod until one window has passed since the rebalancer
// first saw it, since its last decision (an assigned pod stays assigned at least one more window;
// a returned pod cannot be taken again within a window), and since queries last started working
// again after failing (Prometheus may have been down and not scraping: each decision rests on a
// window of data gathered while it was up). Assignment never leaves
// fewer than spec.rebalancing.minRolloutReplicas unassigned running rollout pods; among idle
// pods the highest index goes first (as in scale-down).
//
// A decision is written where the runtime and people can read it:
//   - the pod's annotation tlt.dev/assignment: drafter (removed to return it), a merge patch;
//   - an Event on the RLJob (PodAssignedToDrafter / PodReturnedToRollout);
//   - tlt_operator_rebalancer_decisions_total{namespace,job,action} (assign_drafter,
//     return_rollout); a job's series are removed by the first pass that no longer finds the
//     job in the cache (deleted; a finished job keeps them);
//   - condition DrafterAssigned in the RLJob's status: True with the assigned pods, or False;
//   - a log line.
// Prometheus unreachable, slow or answering garbage: no decision for that
// job, condition RebalancerDegraded True with the error and the URL, a Warning Event when it
// turns True, tlt_operator_prometheus_query_errors_total counted, an error log line. The first
// successful pass sets it False again (reason QueriesSucceeded, a Normal Event).
//
// State kept in memory (per pod: when a decision may next be made) is rebuilt from the cluster
// after a restart: assigned pods are read from their annotation, and every pod then waits one
// window, so a restart can delay decisions but never repeat or reverse one early.
//
// Dedicated drafter pods (spec.roles.drafter). After the pod decisions of a pass, the job as a
// whole is looked at:
//   starving  spec.drafter.training.enabled, at least one running rollout pod, none assigned,
//             and every one past its hold with busy > 1 - idleBelow: over a whole window no
//             rollout pod was idle, so no rollout pod can train the drafter. Add one pod:
//             spec.roles.drafter.replicas + 1, never above roles.drafter.maxReplicas (at the cap:
//             condition reason MaxReplicasReached and one log line, nothing else).
//   idle      some rollout pod is assigned, or an unassigned one past its hold has idle <
//             idleBelow (idle for a whole window), or drafter training is off. Remove one pod
//             the rebalancer added: replicas - 1, never below roles.drafter.minReplicas and never
//             below the count a user set (only pods the rebalancer added are removed).
// Inside Kueue's quota (the operator's --kueue, a job labelled kueue.x-k8s.io/queue-name,
// controller/kueue.h): a pod is added only while the job's Workload was admitted with at least
// replicas + 1 drafter pods; else a Warning Event DrafterQuotaExceeded (once while it lasts) and
// condition DrafterScaled True, reason AdmittedQuotaReached. Assigning rollout pods to drafter
// training changes no pod count, so no quota.
// At most one change per window per job: none within a window of the previous one (or of a
// user's edit the rebalancer noticed). Since a pod's hold covers its first window, a job's first
// change also comes a window after the rebalancer first saw its pods (and after a restart).
//
// How a change is made, like an autoscaler scales its target: the rebalancer merge-patches the
// RLJob's spec.roles.drafter.replicas (guarded by resourceVersion), and the reconciler creates
// or deletes pods <job>-drafter-<i> as for any edit of replicas (highest index first), and
// rewrites the job's ConfigMap. `kubectl get rljob -o yaml` thus shows the replicas that run.
// The same patch sets the annotation tlt.dev/drafter-scaling on the RLJob, the rebalancer's
// record: {"replicas": R, "added": A, "action": "add"|"remove"|"adopt", "time": RFC 3339}, R the
// replicas it wrote, A how many of them it added on top of the user's count. Writing both in one
// request keeps them consistent, and the record is what a restarted operator reads (nothing
// about drafter pods is kept only in memory). A is never taken above replicas - minReplicas (a
// raised minReplicas keeps pods the rebalancer added); an unreadable record counts as none
// (every pod the user's; a warning, once). The patch is made on the job as re-read just before,
// and only if neither replicas nor the record changed since the pass listed it; a failed write
// (a conflict, the apiserver down) is logged and the decision waits for the next interval.
// A user's own edit is never fought: when spec.roles.drafter.replicas differs from the record's
// R, someone else changed it; the rebalancer adopts the new value as the user's count (A = 0:
// it will not remove below it), writes the record (action adopt, an Event DrafterReplicasAdopted)
// and makes no change within a window of noticing the edit. It may still add pods above the
// user's count while the drafter starves; lowering maxReplicas (to replicas) stops that.
//
// A decision about drafter pods is written as
//   - the patch above (spec.roles.drafter.replicas and the record);
//   - an Event on the RLJob (DrafterPodAdded / DrafterPodRemoved);
//   - tlt_operator_rebalancer_decisions_total{action} add_drafter / remove_drafter;
//   - condition DrafterScaled: True while pods the rebalancer added run (reason DrafterPodAdded
//     or DrafterPodRemoved, the last decision), False when none (NoDrafterPodsAdded,
//     DrafterPodRemoved, DrafterReplicasAdopted), True with reason MaxReplicasReached while the
//     drafter starves at the cap; the message names replicas, the user's count and the bounds.
//     (The reconciler, woken by the spec change, may write its status from a cache that has not
//     seen the condition yet; the rebalancer writes it again at its next interval.)
//   - a log line.
// The runtime's side: the trainer takes a drafter pod that connects at its next step boundary
// and carries on without one that leaves (runtime/rl/run.h).
//
// Where each part lives: rebalancer.cc (the pass over jobs, degradation, conditions),
// pod_assignment.cc (assigning and returning rollout pods), drafter_scaling.cc (dedicated drafter
// pods), promql.h (the queries and how their answers are read).
//
// Thread safety: not thread-safe; one thread calls tick() (RebalancerLoop in loop.h).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/labels.h"
#include "api/spec.h"
#include "kube/client.h"
#include "operator/controller/cache.h"
#include "operator/controller/clock.h"
#include "operator/controller/job.h"
#include "operator/controller/metrics.h"
#include "operator/rebalancer/prometheus_client.h"
#include "operator/rebalancer/promql.h"

namespace tlt::rebalancer {

using api::kAssignedToDrafter;  // api/labels.h: the contract with the runtime pods
using api::kAssignmentAnnotation;
inline constexpr const char* kDegradedCondition = "RebalancerDegraded";
inline constexpr const char* kAssignedCondition = "DrafterAssigned";
inline constexpr const char* kDrafterScaledCondition = "DrafterScaled";
inline constexpr const char* kDrafterScalingAnnotation = "tlt.dev/drafter-scaling";

struct RebalancerOptions {
  std::string namespace_;  // RLJobs of this namespace; "" for all
  // Where utilisation is queried. The operator's --prometheus-url is the default; a job's
  // spec.rebalancing.prometheusURL is used only when it matches an entry of
  // --prometheus-url-allow (prometheus_url_allowed), since the operator fetches it from inside
  // the cluster on the job author's behalf. A spec URL not allowed is not fetched: the default
  // is used (a Warning Event says so), or, with no default, RebalancerDegraded True with reason
  // PrometheusURLNotAllowed. No response body ever reaches status, Events or logs
  // (prometheus_client.h).
  std::string prometheus_url;                        // e.g. http://prometheus.monitoring:9090
  std::vector<std::string> allowed_prometheus_urls;  // e.g. {"http://prometheus.monitoring:9090"}
  std::chrono::seconds discovery{10};  // the cache's RLJobs are looked through at least this often
};

// Whether `url` is an entry of `allowed` or below one: equal to it, or starting with it
// followed by "/" (so "http://prom:9090" allows "http://prom:9090/prometheus" but neither
// "http://prom:9090.evil.example" nor "http://prom:9090@evil.example"). Trailing slashes of the
// entries are ignored; empty entries allow nothing.
bool prometheus_url_allowed(const std::string& url, const std::vector<std::string>& allowed);

class Rebalancer {
 public:
  // Everything is borrowed and must outlive the rebalancer. RLJobs and their pods are read from
  // `cache` (the controller's informer cache: no list per interval); `kube` only re-reads a job
  // by name before a write, and writes.
  Rebalancer(kube::KubeClient* kube, const controller::Cache* cache, PrometheusClient* prometheus,
             const controller::Clock* clock, controller::OperatorMetrics* metrics,
             RebalancerOptions options);
  Rebalancer(const Rebalancer&) = delete;
  Rebalancer& operator=(const Rebalancer&) = delete;

  // Reads the RLJobs from the cache and rebalances every one whose interval has passed (a job seen
  // for the first time is looked at at once). Returns how long until the next call is useful: the
  // nearest job's next look, at most options.discovery. Failures go to logs, Events, conditions
  // and metrics; nothing is thrown.
  std::chrono::milliseconds tick();

 private:
  struct PodState {
    bool assigned = false;
    controller::WallTime hold_until;  // no decision about the pod before this
  };
  struct JobState {
    std::string uid;
    controller::WallTime next_look;
    bool looked = false;
    bool degraded = false;                 // as last reported (Events only on changes)
    bool capped = false;                   // starving at maxReplicas, as last logged
    bool over_quota = false;               // starving at the admitted drafters, as last told
    std::string bad_record;                // an unreadable drafter record, as last logged
    std::string refused_url;               // a spec URL not allowed, as last reported
    std::map<std::string, PodState> pods;  // by pod name
  };
  struct Decision {
    std::string pod;
    bool assign = false;  // else return
    double value = 0.0;   // the idle (assign) or busy (return) value that decided it
  };
  struct Pod {
    std::string name;
    int index = -1;
    bool assigned = false;
  };
  // The annotation tlt.dev/drafter-scaling as read back (see the top).
  struct DrafterRecord {
    bool present = false;  // false: the rebalancer never changed this job's drafter pods
    int32_t replicas = 0;  // spec.roles.drafter.replicas as the rebalancer wrote or adopted it
    int32_t added = 0;     // pods it added on top of the user's count
    std::string action;    // add, remove, adopt
    std::optional<controller::WallTime> time;  // when it wrote the record
  };
  // What the rollout pods say about the drafter this pass.
  struct DrafterSignal {
    bool starving = false;  // no rollout pod idle or assigned over a whole window
    bool idle = false;      // a rollout pod is assigned or was idle for a whole window
    std::string why;        // a sentence for Events and logs
  };

  // One pass over a job (rebalancer.cc): pods, queries, pod decisions, drafter scaling, then
  // the conditions.
  void rebalance(const controller::ObservedJob& job, const nlohmann::json& object,
                 const api::RLJobSpec& spec, JobState* state);
  // Runs both queries (promql.h).
  StatusOr<Utilisation> utilisation(const controller::ObservedJob& job,
                                    const api::RebalancingSpec& spec, const std::string& url);

  // Pod assignment (pod_assignment.cc).
  // The job's running rollout pods, from the cache, with their assignment annotation.
  StatusOr<std::vector<Pod>> running_rollout_pods(const controller::ObservedJob& job);
  // The pods to assign and to return this pass (the rules at the top).
  std::vector<Decision> decide(const api::RebalancingSpec& spec, const std::vector<Pod>& pods,
                               const Utilisation& values, JobState* state);
  // Annotates the pod, then the Event, metric and log line; false (logged) when the patch
  // failed: the decision waits for the next interval.
  bool apply(const controller::ObservedJob& job, const api::RebalancingSpec& spec,
             const Decision& d);

  // Drafter scaling (drafter_scaling.cc).
  // Adds or removes a dedicated drafter pod when the signal says so and the record allows;
  // returns the DrafterScaled condition to store.
  nlohmann::json scale_drafters(const controller::ObservedJob& job, const nlohmann::json& object,
                                const api::RLJobSpec& spec, const std::vector<Pod>& pods,
                                const Utilisation& values, JobState* state);
  // The record on `object`; present = false when there is none or it is unreadable (a warning,
  // logged once per value: the replicas are then all the user's).
  DrafterRecord drafter_record(const controller::ObservedJob& job, const nlohmann::json& object,
                               JobState* state) const;
  // Records a user's edit of spec.roles.drafter.replicas (the record's replicas differ) as the
  // user's count; returns the DrafterScaled condition, or null to keep the stored one.
  nlohmann::json adopt_drafter_replicas(const controller::ObservedJob& job,
                                        const nlohmann::json& object, const DrafterRecord& rec,
                                        const api::RLJobSpec& spec);
  // Writes the change from `was` to next.replicas; then the Event, metric and log line. False
  // (logged) when the write failed: the decision waits for the next interval.
  bool change_drafter_replicas(const controller::ObservedJob& job, const nlohmann::json& object,
                               const api::RLJobSpec& spec, const DrafterSignal& sig, int32_t was,
                               const DrafterRecord& next);
  nlohmann::json drafter_condition(const controller::ObservedJob& job, const api::RLJobSpec& spec,
                                   const DrafterSignal& sig, const DrafterRecord& rec,
                                   bool capped) const;
  // With Kueue (controller/kueue.h: the cache keeps Workloads and the job names a queue): the
  // drafter pods its Workload's admission counts (0 while not admitted); nullopt otherwise.
  std::optional<int32_t> admitted_drafters(const controller::ObservedJob& job,
                                           const nlohmann::json& object) const;
  DrafterSignal drafter_signal(const api::RLJobSpec& spec, const std::vector<Pod>& pods,
                               const Utilisation& values, const JobState& state) const;
  // Patches spec.roles.drafter.replicas (when `replicas` differs from the listed job's) and the
  // record, on the job as it is now, provided neither changed since `object` was listed.
  Status write_drafter_replicas(const controller::ObservedJob& job, const nlohmann::json& object,
                                int32_t replicas, const DrafterRecord& record);
  // Shared by both (rebalancer.cc).
  // RebalancerDegraded True with `reason` (PrometheusQueryFailed, PrometheusURLNotAllowed).
  void degraded(const controller::ObservedJob& job, const std::string& url, const Status& why,
                JobState* state, const std::string& reason);
  // The URL to query for a job whose spec names `spec_url` (rules at RebalancerOptions); a
  // refused spec URL is one Warning Event PrometheusURLNotAllowed per URL. "" when none.
  std::string prometheus_url_for(const controller::ObservedJob& job, const std::string& spec_url,
                                 JobState* state);
  // Replaces the given conditions (by type) in the job's status as read again now, when that
  // changes them (controller::merge_conditions); a null condition keeps the stored one of its
  // type.
  void write_conditions(const controller::ObservedJob& job,
                        const std::vector<std::pair<std::string, nlohmann::json>>& conditions);
  void event(const controller::ObservedJob& job, const std::string& type, const std::string& reason,
             const std::string& message);

  // Constant after construction.
  kube::KubeClient* const kube_;
  const controller::Cache* const cache_;
  PrometheusClient* const prometheus_;
  const controller::Clock* const clock_;
  controller::OperatorMetrics* const metrics_;
  const RebalancerOptions options_;

  std::map<std::string, JobState> jobs_;  // by "namespace/name"
};

}  // namespace tlt::rebalancer
