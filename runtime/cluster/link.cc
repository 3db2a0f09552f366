#include "runtime/cluster/link.h"

#include <algorithm>
#include <cstdlib>

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

StatusOr<std::vector<int>> ClusterLink::drafter_assignments() {
  kube::ListOptions o;
  o.label_selector = std::string(api::kJobLabel) + "=" + job_ + "," + api::kRoleLabel + "=rollout";
  StatusOr<kube::ObjectList> list = client_->list(pods(ns_), o);
  if (!list.ok()) return list.status();
  std::vector<int> out;
  for (const nlohmann::json& pod : list->items) {
    const nlohmann::json& meta = pod.value("metadata", nlohmann::json::object());
    std::string assignment = meta.value("annotations", nlohmann::json::object())
                                 .value(api::kAssignmentAnnotation, std::string());
    if (assignment != api::kAssignedToDrafter) continue;
    std::string index =
        meta.value("labels", nlohmann::json::object()).value(api::kIndexLabel, std::string());
    char* end = nullptr;
    long i = std::strtol(index.c_str(), &end, 10);
    if (index.empty() || *end != '\0' || i < 0) continue;
    out.push_back(int(i));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status ClusterLink::report_progress(const std::string& pod, const nlohmann::json& progress) {
  nlohmann::json patch = {
      {"metadata", {{"annotations", {{api::kProgressAnnotation, progress.dump()}}}}}};
  StatusOr<nlohmann::json> r = client_->patch(pods(ns_), pod, patch);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace tlt::cluster
