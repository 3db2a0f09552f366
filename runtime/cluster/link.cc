#include "runtime/cluster/link.h"

#include <string>

#include "api/labels.h"
#include "kube/cpprest_transport.h"
#include "kube/kubeconfig.h"

namespace tlt::cluster {
namespace {

kube::Resource pods(const std::string& ns) {
  return {"", "v1", "pods", ns};
}

}  // namespace

ClusterLink::ClusterLink(std::unique_ptr<kube::KubeClient> client, std::string ns, std::string job)
    : client_(std::move(client)), ns_(std::move(ns)), job_(std::move(job)) {}

StatusOr<std::unique_ptr<ClusterLink>> ClusterLink::connect(const std::string& kubeconfig,
                                                            const std::string& ns,
                                                            const std::string& job) {
  StatusOr<kube::Credentials> creds =
      kubeconfig.empty() ? kube::in_cluster_credentials() : kube::load_kubeconfig(kubeconfig);
  if (!creds.ok()) return creds.status();
  return std::make_unique<ClusterLink>(kube::make_client(kube::make_cpprest_transport(*creds)), ns,
                                       job);
}

StatusOr<std::vector<int>> ClusterLink::drafter_assignments(int rollout_replicas) {
  std::vector<int> out;
  for (int i = 0; i < rollout_replicas; ++i) {
    StatusOr<nlohmann::json> pod = client_->get(pods(ns_), api::pod_name(job_, "rollout", i));
    if (!pod.ok() && pod.status().code() == StatusCode::kNotFound) continue;
    if (!pod.ok()) return pod.status();
    const nlohmann::json& meta = pod->value("metadata", nlohmann::json::object());
    const nlohmann::json labels = meta.value("labels", nlohmann::json::object());
    if (labels.value(api::kJobLabel, std::string()) != job_ ||
        labels.value(api::kIndexLabel, std::string()) != std::to_string(i))
      continue;
    std::string assignment = meta.value("annotations", nlohmann::json::object())
                                 .value(api::kAssignmentAnnotation, std::string());
    if (assignment == api::kAssignedToDrafter) out.push_back(i);
  }
  return out;
}

Status ClusterLink::report_progress(const std::string& pod, const nlohmann::json& progress) {
  nlohmann::json patch = {
      {"metadata", {{"annotations", {{api::kProgressAnnotation, progress.dump()}}}}}};
  StatusOr<nlohmann::json> r = client_->patch(pods(ns_), pod, patch);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace tlt::cluster
