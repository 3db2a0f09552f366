// The objects a job should own, as pure functions of its spec:
//   - Pod <job>-<role>-<i> per role replica: labels tlt.dev/job, tlt.dev/role, tlt.dev/index
//     (and the job's own labels), a controller ownerReference to the job, the user's
//     podTemplate merged in, and a container "tlt" running `tlt run-role` with TLT_JOB,
//     TLT_ROLE, TLT_INDEX, TLT_NAMESPACE, TLT_SERVICE, TLT_JOB_FILE in its environment and the
//     job's ConfigMap mounted at /etc/tlt;
//   - a headless Service <job> selecting the job's pods (rendezvous by DNS:
//     <pod>.<job>.<namespace>.svc);
//   - a ConfigMap <job>-spec whose job.json is the job (spec with defaults filled in).
// Each is what the operator writes (server-side apply for the pods and the ConfigMap, a create
// for the Service): only the fields it owns.
//
// Merge rules for the podTemplate: the user's metadata and spec are the base; the operator's
// labels, name, namespace and ownerReferences win; restartPolicy is always Never (the operator
// restarts failed pods, counting against backoffLimit); a container named "tlt" in the template
// is merged with the operator's (the template's image, if any, wins over --runtime-image; the
// operator's command, env, resources and mount win); other containers (sidecars) and volumes are
// kept; automountServiceAccountToken defaults to false.
//
// Thread safety: stateless functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "operator/controller/job.h"

namespace tlt::controller {

struct PodOptions {
  std::string runtime_image = "ghcr.io/tlt-dev/tlt:latest";  // the `tlt` binary's image
  int rendezvous_port = 29500;                               // the Service's port
};

std::string pod_name(const std::string& job, const std::string& role, int index);
std::string configmap_name(const std::string& job);  // "<job>-spec"
// "tlt.dev/job=<job>": the pods of a job (and any other job's of the same name: filter by
// owner uid with owned_by()).
std::string pod_selector(const std::string& job);
// Whether `object`'s controller ownerReference points at the object with `uid`.
bool owned_by(const nlohmann::json& object, const std::string& uid);

nlohmann::json owner_reference(const ObservedJob& job);
nlohmann::json desired_configmap(const JobView& job);
nlohmann::json desired_service(const JobView& job, const PodOptions& options);
nlohmann::json desired_pod(const JobView& job, const RoleView& role, int index,
                           const PodOptions& options);

}  // namespace tlt::controller
