// The rebalancer's PromQL: the two instant queries it asks about a job's rollout pods, and how
// their answers become per-pod utilisation (rebalancer.h has the rules that use them).
//
// Thread safety: stateless functions.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "api/spec.h"
#include "operator/rebalancer/prometheus_client.h"

namespace tlt::rebalancer {

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

// Per pod name: (idle, busy) as ratios.
using Utilisation = std::map<std::string, std::pair<double, double>>;

// The answers of q.idle and q.busy as per-pod (idle, busy) ratios: each sample's value times
// q.scale, keyed by its q.pod_label label. Samples without that label are skipped; a pod only
// one of the answers names is left out (no decision rests on half the data).
Utilisation read_utilisation(const UtilisationQueries& q, const std::vector<Sample>& idle,
                             const std::vector<Sample>& busy);

}  // namespace tlt::rebalancer
