// The objects a job should own, as pure functions of its spec. Every one is labelled
// tlt.dev/job=<job>, tlt.dev/kind=<kind> and app.kubernetes.io/managed-by=tlt-operator (the
// informers select by the last two: owned_selector()). The Service and the ConfigMap are named per
// kind
// (<job>-rl, <job>-tst), so that an RLJob and a TSTPretrainJob may share a name; pod names need
// no suffix (the two kinds' roles differ: rollout, trainer, drafter; workers).
//   - Pod <job>-<role>-<i> per role replica: labels tlt.dev/job, tlt.dev/kind, tlt.dev/role,
//     tlt.dev/index (and the job's own labels), a controller ownerReference to the job, the user's
//     podTemplate merged in, and a container "tlt" running `tlt run-role` with TLT_JOB,
//     TLT_ROLE, TLT_INDEX, TLT_NAMESPACE, TLT_SERVICE, TLT_JOB_FILE in its environment and the
//     job's ConfigMap mounted at /etc/tlt; an RLJob's trainer pods also carry the reward
//     sidecar when spec.reward asks for one (reward_sidecar.h). Every RLJob pod also gets
//     TLT_WEIGHT_SYNC_PORT and TLT_WEIGHT_SYNC_ADDRESS (<job>-trainer-0.<service>:<port>: the
//     weight-sync group's rendezvous), and the "tlt" container of trainer pod 0 a container
//     port named "weight-sync" on that port. An RLJob's trainer pods, the ranks of one c10d
//     group (rank TLT_INDEX, rank 0 hosting the group's store), also get TLT_TRAINER_WORLD (the
//     role's replicas when the pod is made, also the pod's label kTrainerWorldLabel),
//     TLT_TRAINER_GROUP_PORT and TLT_TRAINER_GROUP_ADDRESS (<job>-trainer-0.<service>:<port>),
//     and trainer pod 0's "tlt" container a port named "trainer-group" on that port;
//   - a headless Service <job>-rl or <job>-tst selecting the job's pods (rendezvous by DNS:
//     <pod>.<service>.<namespace>.svc; TLT_SERVICE names it), with the port "rendezvous" and,
//     for an RLJob, "weight-sync" and "trainer-group";
//   - a ConfigMap <service>-spec whose job.json is the job (spec with defaults filled in);
//   - the job's identity, all three named like the Service (<job>-rl, <job>-tst): a
//     ServiceAccount (automountServiceAccountToken false), a Role and a RoleBinding of the Role
//     to that ServiceAccount. The Role lets the job's pods do what the runtime does through the
//     apiserver (runtime/cluster/link.h) and nothing more: `get` the job's own pods (resourceNames:
//     every pod name the spec asks for now, so it follows scaling) and `patch` the one pod that
//     reports the job's progress (<job>-trainer-0; <job>-workers-0), by resourceNames too. A rule
//     whose name list would be empty is left out (an empty resourceNames allows every name).
//     Pods run as this ServiceAccount unless the podTemplate names one the admin listed
//     (--pod-policy-service-account); automountServiceAccountToken is false, and only the progress
//     pod of an RLJob, whose runtime uses the apiserver, gets the token: a projected volume in
//     its "tlt" container alone, unless the template sets automountServiceAccountToken itself;
//   - the job's network surface (job_network.h): a Secret <service>-secret, mounted into the
//     "tlt" container of every pod only, and a NetworkPolicy <service> fencing the pods' ports.
// Each is what the operator writes (a create for each; later changes of the ConfigMap by
// server-side apply): only the fields it owns.
//
// Merge rules for the podTemplate: the user's metadata and spec are the base; the operator's
// labels, name, namespace and ownerReferences win; restartPolicy is always Never (the operator
// restarts failed pods, counting against backoffLimit); a container named "tlt" in the template
// is merged with the operator's (the template's image, if any, wins over --runtime-image; the
// operator's command, env, resources and mount win); other containers (sidecars) and volumes are
// kept; serviceAccountName defaults to the job's own ServiceAccount and
// automountServiceAccountToken to false (see above).
//
// Security context: the pods pass the `restricted` Pod Security Standard unless the podTemplate
// says otherwise (within the admin's pod policy, pod_policy.h). Where the template is silent the
// pod gets runAsNonRoot, runAsUser/runAsGroup kRuntimeUser (the runtime image's USER, checked
// against docker/*.Dockerfile by tests/helm/check_dockerfiles.py) and seccomp RuntimeDefault;
// every container allowPrivilegeEscalation false and capabilities drop ALL; the "tlt" container
// also readOnlyRootFilesystem, with an emptyDir "tlt-tmp" at /tmp (its work dir).
//
// Thread safety: stateless functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/controller/job.h"
#include "operator/controller/job_network.h"
#include "operator/controller/pod_policy.h"

namespace tlt::controller {

// The uid and gid of the runtime image (docker/runtime.Dockerfile: USER 65532:65532).
inline constexpr int64_t kRuntimeUser = 65532;

// An RLJob's weight-sync group (runtime/rl/weight_sync.h): its trainer pod 0 hosts the c10d
// store on this port (the runtime's default TLT_WEIGHT_SYNC_PORT), which the Service and that
// pod's "tlt" container name kWeightSyncPortName.
inline constexpr int kWeightSyncPort = 29501;
inline constexpr const char* kWeightSyncPortName = "weight-sync";
// An RLJob's trainer group (its ranks' data-parallel update): trainer pod 0 hosts its c10d
// store on PodOptions::trainer_group_port, named kTrainerGroupPortName in the Service and that
// pod's "tlt" container.
inline constexpr int kTrainerGroupPort = 29502;
inline constexpr const char* kTrainerGroupPortName = "trainer-group";

struct PodOptions {
  std::string runtime_image = "ghcr.io/tlt-dev/tlt:latest";  // the `tlt` binary's image
  int rendezvous_port = 29500;                               // the Service's port
  PodPolicy policy;  // what a podTemplate may ask for (pod_policy.h); checked by the reconciler
  // URLs an http reward may name (reward_sidecar.h), e.g. {"http://reward.scoring:8000"}.
  std::vector<std::string> reward_url_allow;
  NetworkPolicyOptions network_policy;  // the job's NetworkPolicy (job_network.h)
  // An RLJob's trainer group (TLT_TRAINER_GROUP_PORT; not rendezvous_port nor kWeightSyncPort).
  int trainer_group_port = kTrainerGroupPort;
};

std::string pod_name(const std::string& job, const std::string& role, int index);
// "<job>-rl" for an RLJob, "<job>-tst" for a TSTPretrainJob: never the same for two jobs.
std::string service_name(const std::string& kind, const std::string& job);
std::string configmap_name(const std::string& kind, const std::string& job);  // "<service>-spec"
// The names the Service and ConfigMap had before they were named per kind (<job>, <job>-spec):
// a deleted job removes those it owns too.
std::vector<std::string> legacy_child_names(const std::string& job);
// The label every object the operator makes carries, and its value.
inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kManagedBy = "tlt-operator";
// "app.kubernetes.io/managed-by=tlt-operator,tlt.dev/job": what the informers of the owned types
// select (an object of anyone else's needs both labels to be seen at all).
std::string owned_selector();
// The labels that identify `object` as a child of its job: tlt.dev/job, tlt.dev/kind and
// app.kubernetes.io/managed-by (pods also tlt.dev/role and tlt.dev/index), as `want` (a desired
// object) has them; {} when `have` carries all of them with the same values.
nlohmann::json missing_labels(const nlohmann::json& have, const nlohmann::json& want);
// "tlt.dev/job=<job>": the pods of a job (and any other job's of the same name: filter by
// owner uid with owned_by()).
std::string pod_selector(const std::string& job);
// Whether `object`'s controller ownerReference points at the object with `uid`.
bool owned_by(const nlohmann::json& object, const std::string& uid);

nlohmann::json owner_reference(const ObservedJob& job);
// {tlt.dev/job: <job>, tlt.dev/kind: <kind>}: what selects the job's pods (its Service, its
// NetworkPolicy).
nlohmann::json job_selector_labels(const JobView& job);
// The metadata of the job's child `name`: namespace, the labels of every child, the controller
// ownerReference to the job.
nlohmann::json child_object_meta(const JobView& job, const std::string& name);
nlohmann::json desired_configmap(const JobView& job);
nlohmann::json desired_service(const JobView& job, const PodOptions& options);
nlohmann::json desired_pod(const JobView& job, const RoleView& role, int index,
                           const PodOptions& options);
// The job's identity (see the top): the ServiceAccount, Role and RoleBinding, each named
// identity_name(kind, job) == service_name(kind, job).
std::string identity_name(const std::string& kind, const std::string& job);
// "<job>-trainer-0" (RLJob) or "<job>-workers-0" (TSTPretrainJob): the pod whose runtime writes
// the job's progress annotation, the only one its Role may patch.
std::string progress_pod_name(const JobView& job);
nlohmann::json desired_service_account(const JobView& job);
nlohmann::json desired_role(const JobView& job);
nlohmann::json desired_role_binding(const JobView& job);

}  // namespace tlt::controller
