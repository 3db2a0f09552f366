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
//     return_rollout);
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
// Thread safety: not thread-safe; one thread calls tick() (RebalancerLoop in loop.h).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/labels.h"
#include "api/spec.h"
#include "operator/controller/clock.h"
#include "operator/controller/job.h"
#include "operator/controller/metrics.h"
#include "operator/kube/client.h"
#include "operator/rebalancer/prometheus_client.h"

namespace tlt::rebalancer {

using api::kAssignedToDrafter;  // api/labels.h: the contract with the runtime pods
using api::kAssignmentAnnotation;
inline constexpr const char* kDegradedCondition = "RebalancerDegraded";
inline constexpr const char* kAssignedCondition = "DrafterAssigned";

struct RebalancerOptions {
  std::string namespace_;              // RLJobs of this namespace; "" for all
  std::string prometheus_url;          // --prometheus-url: when set, used instead of every
                                       // spec.rebalancing.prometheusURL (an operator outside
                                       // the cluster reaches Prometheus by another address)
  std::chrono::seconds discovery{10};  // RLJobs are listed at least this often
};

// The two queries for a job, and how to read their answers.
struct UtilisationQueries {
  std::string idle;       // per pod: the highest utilisation over the window
  std::string busy;       // per pod: the lowest utilisation over the window
  std::string pod_label;  // the label that names the pod in the answers
  double scale = 1.0;     // multiplies a value into a ratio (DCGM_FI_DEV_GPU_UTIL is percent)
};

// For the runtime's tlt_gpu_busy_ratio: the selector {job="<job>", L=~"<job>-rollout-[0-9]+"}
// (the runtime labels its series with the job's name; Prometheus scrapes it with honor_labels).
// For DCGM metrics, which know pods but not jobs: {N="<namespace>", L=~"<job>-rollout-[0-9]+"}
// where N is exported_namespace when L is exported_pod, else namespace; DCGM_FI_DEV_GPU_UTIL is
// scaled from percent to a ratio.
UtilisationQueries utilisation_queries(const api::RebalancingSpec& spec,
                                       const std::string& namespace_, const std::string& job);

class Rebalancer {
 public:
  // Everything is borrowed and must outlive the rebalancer.
  Rebalancer(kube::KubeClient* kube, PrometheusClient* prometheus, const controller::Clock* clock,
             controller::OperatorMetrics* metrics, RebalancerOptions options);
  Rebalancer(const Rebalancer&) = delete;
  Rebalancer& operator=(const Rebalancer&) = delete;

  // Lists the RLJobs and rebalances every one whose interval has passed (a job seen for the
  // first time is looked at at once). Returns how long until the next call is useful: the
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

  void rebalance(const controller::ObservedJob& job, const api::RebalancingSpec& spec,
                 JobState* state);
  StatusOr<std::vector<Pod>> running_rollout_pods(const controller::ObservedJob& job);
  // Runs both queries; per pod (idle, busy) as ratios.
  StatusOr<std::map<std::string, std::pair<double, double>>> utilisation(
      const controller::ObservedJob& job, const api::RebalancingSpec& spec, const std::string& url);
  std::vector<Decision> decide(const api::RebalancingSpec& spec, const std::vector<Pod>& pods,
                               const std::map<std::string, std::pair<double, double>>& values,
                               JobState* state);
  bool apply(const controller::ObservedJob& job, const api::RebalancingSpec& spec,
             const Decision& d);
  void degraded(const controller::ObservedJob& job, const std::string& url, const Status& why,
                JobState* state);
  // Replaces the rebalancer's two conditions in the stored status when they differ.
  void write_conditions(const controller::ObservedJob& job, const nlohmann::json& degraded,
                        const nlohmann::json& assigned);
  void event(const controller::ObservedJob& job, const std::string& type, const std::string& reason,
             const std::string& message);

  // Constant after construction.
  kube::KubeClient* const kube_;
  PrometheusClient* const prometheus_;
  const controller::Clock* const clock_;
  controller::OperatorMetrics* const metrics_;
  const RebalancerOptions options_;

  std::map<std::string, JobState> jobs_;  // by "namespace/name"
};

}  // namespace tlt::rebalancer
