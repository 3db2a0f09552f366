// Kueue's job-framework contract, the operator's side (docs/kueue.md): pure functions of a job and
// its Workload (kueue.x-k8s.io/v1beta2). The reconciler's steps that use them are in
// reconcile_kueue.cc (reconciler.h, "kueue").
//
// With the operator's --kueue on, a job labelled kueue.x-k8s.io/queue-name=<LocalQueue> runs only
// while Kueue admits its Workload:
//   Workload  one per job, named workload_name(), in the job's namespace, labelled like the job's
//             other children (tlt.dev/job, tlt.dev/kind, managed-by) and kueue.x-k8s.io/job-uid,
//             with a controller ownerReference to the job and no finalizer (the operator deletes
//             it with the job: no garbage collector is assumed); spec.queueName is the label's
//             value; one pod set per role (trainer, rollout, drafter; workers) whose count is the
//             role's replicas (0 allowed: Kueue's minimum is 0) and whose template is the role's
//             pod 0 as desired.h makes it, less what Kueue does not read (workload_pod_sets());
//             spec.priorityClassRef and spec.priority name the WorkloadPriorityClass of the job's
//             kueue.x-k8s.io/priority-class label, else the PriorityClass of the first role
//             whose podTemplate names one, else nothing.
//   held      no pods while the Workload is missing, not admitted, evicted or being deleted;
//             running pods are deleted (SIGTERM: the trainer checkpoints on its volume). Phase
//             Queued.
//   admitted  condition Admitted True: the pods are made, each with its pod set's placement:
//             the nodeLabels of the ResourceFlavors of its podSetAssignment merged into its
//             nodeSelector, their tolerations appended (placement_of()).
//   evicted   condition Evicted True: the pods are deleted; once none is left the operator
//             clears the admission (requeue_status(): QuotaReserved False reason Pending,
//             Admitted False, Requeued), as Kueue's own job controllers do, and Kueue queues the
//             Workload again. Admitted again: the pods resume from the trainer's checkpoint.
//   changed   pod sets are immutable in Kueue. A Workload not admitted whose pod sets or queue
//             differ from the job's is deleted and made again; an admitted one is kept while
//             every role asks for no more pods than admitted, with the same template
//             (PodSetFit::kWithin), else deleted too (the job queues again for its new size).
//   ready     PodsReady (for Kueue's waitForPodsReady) True once every pod is running and ready,
//             else False (reason WaitForStart before it was first True, WaitForRecovery after).
//   finished  Succeeded or Failed: condition Finished True (reason Succeeded or Failed), which
//             releases the quota. A job refused for its spec, or deleted: the Workload deleted.
// The job's conditions QuotaReserved, Admitted and Evicted mirror the Workload's
// (mirrored_conditions()): a LocalQueue that does not exist shows there in Kueue's own words.
//
// Thread safety: stateless functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "kube/client.h"
#include "operator/controller/desired.h"
#include "operator/controller/job.h"

namespace tlt::controller {

inline constexpr const char* kQueueNameLabel = "kueue.x-k8s.io/queue-name";
inline constexpr const char* kWorkloadPriorityLabel = "kueue.x-k8s.io/priority-class";
// On the Workload: the job's uid.
inline constexpr const char* kJobUidLabel = "kueue.x-k8s.io/job-uid";
// The phase of a job held for Kueue.
inline constexpr const char* kQueuedPhase = "Queued";

kube::Resource workload_resource(const std::string& namespace_);
// Cluster-scoped, read by name: a pod set's flavours and a Workload's priority.
kube::Resource resource_flavor_resource();
kube::Resource workload_priority_class_resource();
kube::Resource priority_class_resource();

// The job's kueue.x-k8s.io/queue-name label; "" when it has none (the job runs as without Kueue).
std::string queue_name(const JobView& job);
// "rljob-<job>" or "tstpretrainjob-<job>".
std::string workload_name(const std::string& kind, const std::string& job);

// The priority a Workload carries: a WorkloadPriorityClass (group kueue.x-k8s.io) or a
// PriorityClass (group scheduling.k8s.io) and its value.
struct WorkloadPriority {
  std::string group, kind, name;
  int32_t value = 0;
};
// The class the job names (see the top), value unset; nullopt when it names none.
std::optional<WorkloadPriority> named_priority(const JobView& job);
// The value of a WorkloadPriorityClass (top-level `value`) or PriorityClass object (the same
// field). InvalidArgument naming the class when it has no integer value.
StatusOr<int32_t> priority_value(const nlohmann::json& priority_class);

// [{name, count, template}] per role, in the job's role order: the template keeps of the desired
// pod 0 the containers' and init containers' name, image and resources, and the pod's
// nodeSelector, affinity, tolerations and priorityClassName.
nlohmann::json workload_pod_sets(const JobView& job, const PodOptions& options);
nlohmann::json desired_workload(const JobView& job, const PodOptions& options,
                                const std::optional<WorkloadPriority>& priority);

// What the reconciler reads of a stored Workload.
struct WorkloadView {
  std::string name, queue;
  bool deleting = false;
  bool quota_reserved = false, admitted = false, evicted = false, finished = false;
  bool pods_ready = false, pods_ready_seen = false;   // PodsReady True / present at all
  nlohmann::json pod_sets = nlohmann::json::array();  // spec.podSets
  std::string cluster_queue;                          // status.admission.clusterQueue
  // podSetAssignments: pod set -> admitted count (the assignment's count, else the spec's).
  std::map<std::string, int32_t> admitted_counts;
  // podSetAssignments: pod set -> the flavour names of its resources (sorted, distinct).
  std::map<std::string, std::vector<std::string>> flavors;
  nlohmann::json conditions = nlohmann::json::array();  // status.conditions
};
WorkloadView read_workload(const nlohmann::json& workload);
// The condition of `type` in a conditions array; null when absent.
nlohmann::json find_condition(const nlohmann::json& conditions, const std::string& type);

enum class PodSetFit {
  kSame,       // the same pod sets, counts and templates
  kWithin,     // the same templates, no count above the admitted one (admitted Workloads only)
  kDifferent,  // anything else
};
PodSetFit compare_pod_sets(const nlohmann::json& want, const WorkloadView& have);

// Where a pod set's pods go: nodeSelector entries and tolerations.
struct Placement {
  nlohmann::json node_selector = nlohmann::json::object();
  nlohmann::json tolerations = nlohmann::json::array();
};
// `placement` with a ResourceFlavor's spec.nodeLabels and spec.tolerations added.
// InvalidArgument naming the label when two flavours of one pod set ask for different values.
Status add_flavor(const nlohmann::json& flavor, Placement* placement);
// `pod` with the placement merged in: nodeSelector entries set (the flavour's win over the
// template's), tolerations appended unless the pod has an equal one.
void apply_placement(const Placement& placement, nlohmann::json* pod);

// The Workload status merge patch after an eviction whose pods are gone: admission null,
// QuotaReserved False (reason Pending, the eviction's message), Admitted False (NoReservation),
// Requeued (True when the eviction's reason is Preempted or NodeFailures). Conditions of other
// types are kept as stored; lastTransitionTime `now` (RFC 3339) on the ones that change status.
nlohmann::json requeue_status(const WorkloadView& workload, const std::string& now);
// The Workload status merge patch that sets condition `type` (kept as stored otherwise).
nlohmann::json condition_status(const WorkloadView& workload, const std::string& type, bool is_true,
                                const std::string& reason, const std::string& message,
                                const std::string& now);

// The job's conditions QuotaReserved, Admitted and Evicted: the Workload's copied (status, reason,
// message), or False with reason WorkloadPending when the Workload has none of a type yet.
// `workload` null: none exists yet (`why`, the message). lastTransitionTime kept from
// `job_status` while a condition's status is unchanged.
std::vector<std::pair<std::string, nlohmann::json>> mirrored_conditions(
    const WorkloadView* workload, const std::string& why, const nlohmann::json& job_status,
    int64_t generation, const std::string& now);

}  // namespace tlt::controller
