// A running job's link to its objects in Kubernetes: what a job's runtime reads from and writes
// to the apiserver (no LibTorch; the client is kube/client.h, shared with the operator).
//
// It reads the rebalancer's assignments (annotation tlt.dev/assignment on the job's rollout
// pods, api/labels.h) and writes the job's progress (annotation tlt.dev/progress on a pod),
// which the operator copies into the job's status.
//
// Errors: connect() returns InvalidArgument / NotFound for a bad kubeconfig (naming the file),
// FailedPrecondition without in-cluster credentials. The calls return the client's Status
// (Unavailable when the apiserver cannot be reached, FailedPrecondition for RBAC, NotFound for
// a missing pod); callers are expected to carry on without the link and say so, never to stop
// the job for it.
// Thread safety: one thread at a time (the driver's, at step boundaries).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "kube/client.h"

namespace tlt::cluster {

class ClusterLink {
 public:
  // Over `client` (owned), for the job `job` in namespace `ns`.
  ClusterLink(std::unique_ptr<kube::KubeClient> client, std::string ns, std::string job);

  // Through the kubeconfig at `kubeconfig`, or the pod's service account when it is "".
  static StatusOr<std::unique_ptr<ClusterLink>> connect(const std::string& kubeconfig,
                                                        const std::string& ns,
                                                        const std::string& job);

  // Indices i of the job's rollout pods <job>-rollout-<i> (0 <= i < rollout_replicas) annotated
  // tlt.dev/assignment=drafter, ascending. Each pod is read by name (a get, not a list: the job's
  // Role grants get on its own pods by name and nothing else); a pod not found, or not labelled
  // with this job and index, is skipped.
  StatusOr<std::vector<int>> drafter_assignments(int rollout_replicas);

  // Sets annotation tlt.dev/progress of pod `pod` to `progress` (a JSON object, serialised), by
  // a merge patch that leaves every other annotation alone.
  Status report_progress(const std::string& pod, const nlohmann::json& progress);

  const std::string& namespace_() const { return ns_; }
  const std::string& job() const { return job_; }

 private:
  std::unique_ptr<kube::KubeClient> client_;
  const std::string ns_, job_;
};

}  // namespace tlt::cluster
