// The level-triggered reconciler of RLJob and TSTPretrainJob. One call looks at the job and its
// pods as the informer cache (cache.h) shows them and moves them one step toward the spec. It
// reads nothing from the apiserver and writes its own writes through to the cache; everything it
// needs is in the job's status and its pods, so a restarted operator, a missed watch event or a
// duplicate one changes nothing.
//
// reconcile(key), in a fixed order:
//   observe   the job from the cache; gone -> done. Being deleted -> delete what it owns (pods,
//             Service, ConfigMap, RoleBinding, Role, ServiceAccount, Secret, NetworkPolicy: no
//             garbage collector is
//             assumed; those of its names that the cache does not show are read by name, and
//             deleted when the job owns them: a child that lost its labels), drop the
//             finalizer, done.
//   finalizer add tlt.dev/cleanup (a merge patch guarded by resourceVersion).
//   strays    a child that lost its labels (cache.h: its owner uid in a store's strays) is
//             re-labelled (tlt.dev/job, tlt.dev/kind, managed-by; a merge patch guarded by
//             resourceVersion) and so comes back into the cache, with one Relabeled Event; a pod
//             whose tlt.dev/role or tlt.dev/index was removed too is then a surplus pod (deleted,
//             and replaced under its name). Also done first when the job is being deleted.
//   validate  decode + validate with api/, then the JSON types of every podTemplate
//             (pod_template.h); invalid -> status Failed, reason InvalidSpec, the message naming
//             the fields; the job's pods are deleted; no requeue (retrying cannot fix it).
//   policy    every role's podTemplate, and the pod made of it, against the admin's pod policy
//             (options.pod.policy: admin rules and a Pod Security Standards level, pod_policy.h);
//             refused -> Failed, reason ForbiddenByPodPolicy, the condition and a Warning Event
//             naming each field and rule or control; the job's pods (made while the policy
//             allowed them) are deleted; no requeue. A job refused for either reason is looked
//             at again when it changes (a fixed spec runs).
//   reward    spec.reward on a cluster (reward_sidecar.h): an http URL outside the admin's
//             --reward-url-allow -> Failed, reason RewardURLNotAllowed; a reward container
//             with no command -> Failed, InvalidSpec; naming the field and the fix, no pods, as
//             above.
//   progress  the pods' tlt.dev/progress reports (progress.h); an unreadable one is skipped with
//             one warning line and one Warning Event (ProgressUnreadable) per annotation value.
//   finished  Succeeded or Failed is kept: pods still running are deleted; after
//             ttlSecondsAfterFinished the job itself is deleted (requeued until then).
//   secret    the job's Secret <service>-secret (job_network.h) created with 32 fresh random
//             bytes when the cache shows none; one the job owns is never written again. A Secret
//             of the name that the job does not own -> Failed, reason JobSecretNotOwned, naming
//             it and the fix; the job's pods are deleted; looked at again when the job changes.
//   act       ConfigMap <job>-rl-spec / <job>-tst-spec (created when missing, applied when
//             different), Service <job>-rl / <job>-tst (created when missing; its spec restored
//             by a merge patch when it differs: child_digest(), cache.h) and the job's
//             identity: ServiceAccount, Role (its rules applied when they differ, e.g. after a
//             scale) and RoleBinding, all named <job>-rl / <job>-tst, and the NetworkPolicy
//             <job>-rl / <job>-tst (applied when it differs; deleted when
//             options.pod.network_policy is off); these four at once (names per kind, identity:
//             desired.h; NetworkPolicy: job_network.h); then
//             pods: Failed pods are deleted and counted in status.restarts (Failed once
//             restarts exceed backoffLimit); every pod of the completion role (trainer;
//             workers) Succeeded -> Succeeded; spec.suspend -> delete every pod; else delete
//             surplus pods (highest index first) and create the missing ones, up to
//             options.max_parallel_creates at a time. Pod names are deterministic and a
//             create that a stale cache repeats finds the job's own object (AlreadyExists, then
//             a get): never a second pod, and no PodsCreated Event for it; the job's own object
//             found so that lacks the labels of desired.h gets them back (a child that lost
//             them while the operator was not watching). An object of the name that the job
//             does not own is never adopted or overwritten. Whether a child differs is decided
//             on child_digest() (cache.h), all the cache keeps of its content.
//   kueue     with options.kueue, for a job labelled kueue.x-k8s.io/queue-name (kueue.h,
//             reconcile_kueue.cc), before its pods: its Workload made or read; until Kueue admits
//             it the job has no pods (phase Queued), once admitted its pods carry the admission's
//             placement; evicted, its pods are deleted, then the admission cleared. Succeeded or
//             Failed marks the Workload Finished; a refused or deleted job's Workload is deleted.
//   pending   pods Pending past options.pods_pending_timeout: condition PodsPending
//             (pods_pending.h), the job looked at again when the next one reaches it.
//   refused   a write the apiserver refuses (Forbidden, Invalid, AlreadyExists, ...: not a
//             transient 429/5xx/timeout/conflict) makes the phase Blocked, the Created condition
//             False with reason = the apiserver's reason and its message (truncated), and one
//             Warning Event of that reason; the error goes back to the work queue, which
//             retries with backoff.
//   status    computed on a copy (job_status.h), patched only when it changed.
// Each decision is one log line and one Event; the first error stops the pass and is returned
// (the caller retries with backoff). A pass that throws (std::exception or other) is contained:
// the job is Failed with reason ReconcileError, naming the job and the exception, in its
// condition and a Warning Event, and is looked at again when it changes; reconcile() never
// throws, so one job never stops the others or the process.
//
// Where each part lives: reconciler.cc (the pass, validation, pods, status),
// reconcile_children.cc (the other children, and their deletion with the job), reconcile_kueue.cc
// (the Workload).
//
// Thread safety: reconcile() may run concurrently for different keys (the work queue never hands
// one key to two workers), on one Reconciler; the client, cache and recorder must be
// thread-safe.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "operator/controller/cache.h"
#include "operator/controller/clock.h"
#include "operator/controller/desired.h"
#include "operator/controller/events.h"
#include "operator/controller/job.h"
#include "operator/controller/job_status.h"
#include "operator/controller/kueue.h"
#include "operator/controller/log.h"

namespace tlt::controller {

// The Failed reasons of a job refused before any pod is made: its spec does not decode or
// validate, or its podTemplate breaks the admin's pod policy (pod_policy.h).
inline constexpr const char* kInvalidSpec = "InvalidSpec";
inline constexpr const char* kForbiddenByPodPolicy = "ForbiddenByPodPolicy";
// The Failed reason of a job whose reconcile threw (a defect of the operator that this job's
// object reaches): the job is refused, as above, and every other job goes on.
inline constexpr const char* kReconcileError = "ReconcileError";
// The Failed reason of a job whose Secret's name (job_network.h) is taken by a Secret it does not
// own: never adopted, since the job's pods would trust whatever it holds.
inline constexpr const char* kJobSecretNotOwned = "JobSecretNotOwned";
// The apiserver's message of a refused write is cut to this many bytes in status and Events.
inline constexpr size_t kMaxRefusalMessage = 400;

struct ReconcileResult {
  Status status;                                      // not OK: retry with backoff
  std::optional<std::chrono::seconds> requeue_after;  // set: look again after this long
  std::string phase;  // the job's phase after this pass; "" when the job is gone
};

struct ReconcilerOptions {
  PodOptions pod;
  int max_parallel_creates = 5;  // a job's missing pods created this many at a time
  // Kueue's job-framework contract (kueue.h) for jobs labelled kueue.x-k8s.io/queue-name; the
  // cache must then keep Workloads (Cache(true)).
  bool kueue = false;
  // A pod Pending this long makes condition PodsPending True (pods_pending.h).
  std::chrono::seconds pods_pending_timeout{300};
};

class Reconciler {
 public:
  // `client` (writes), `cache` (reads), `events` and `clock` are
  // borrowed and must outlive the reconciler.
  Reconciler(kube::KubeClient* client, Cache* cache, EventRecorder* events, const Clock* clock,
             ReconcilerOptions options);
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  // Reconciles the job of `key` ("RLJob/ns/name"). InvalidArgument for a malformed key.
  ReconcileResult reconcile(const std::string& key);

 private:
  struct Pod {
    std::string name, uid, role, phase;
    int index = -1;
    bool deleting = false, ready = false;
    std::optional<std::string> progress;                  // the tlt.dev/progress annotation, if any
    std::optional<WallTime> created;                      // metadata.creationTimestamp
    std::string unscheduled_reason, unscheduled_message;  // PodScheduled False (pods_pending.h)
    std::string trainer_world;  // the label tlt.dev/trainer-world, "" when absent
  };

  // kind=<kind> job=<namespace>/<name>, then `more`: the fields of each log line about a job.
  static LogFields fields(const ObservedJob& job, LogFields more = {});
  ReconcileResult reconcile_job(const std::string& kind, const nlohmann::json& object);
  // After reconcile_job threw `what`: the job Failed with reason ReconcileError naming it
  // (refuse()); Internal when even that throws. Never throws.
  ReconcileResult contain(const std::string& key, const std::string& kind,
                          const nlohmann::json& object, const std::string& what);
  // Deletes what the job owns (also what the cache does not show: remove_unseen()), then drops
  // the finalizer.
  Status finalize(const ObservedJob& job, const nlohmann::json& object);
  // Deletes namespace/name of `r` when a get finds it owned by the job and not being deleted.
  Status remove_unseen(const ObservedJob& job, const kube::Resource& r, const std::string& name);
  Status ensure_finalizer(const ObservedJob& job);
  // Failed with `reason` and `message` (condition and Warning Event, once), no pods, no requeue:
  // retrying cannot fix what the spec asks for.
  // `remove_pods`: the job's pods are deleted first (Events of `reason`).
  ReconcileResult refuse(const ObservedJob& job, const std::string& reason,
                         const std::string& message, const std::string& log_message,
                         bool remove_pods = false);
  std::vector<Pod> observe_pods(const ObservedJob& job);
  // `job` with its trainer role at the running group's world (trainer_world.h), which the
  // children are made of; sets o's trainer_replicas and trainer_world, and records a Warning
  // Event TrainerScalePending when the spec's replicas start to differ from the world.
  JobView running_view(const JobView& job, const std::vector<Pod>& pods, Outcome* o);
  std::optional<Progress> read_progress(const JobView& job, const std::vector<Pod>& pods);
  ReconcileResult finished(const JobView& job, const std::vector<Pod>& pods,
                           std::optional<Progress> progress);
  // Every pod not being deleted, counted into o->roles.
  static std::vector<const Pod*> tally(const std::vector<Pod>& pods, Outcome* o);
  // After a failed write of a child: a transient error is returned as it is; a refusal
  // (Forbidden, Invalid, AlreadyExists, ...) also makes the job Blocked, its Created condition
  // carrying the apiserver's reason and (truncated) message, with one Warning Event per change.
  // Either way the error is returned, and the work queue backs off before the next try.
  ReconcileResult stuck(const JobView& job, const std::vector<Pod>& pods, const Status& why,
                        Outcome o);
  // Creates a child object; when its name is taken, the existing object if this job owns it
  // (the cache lagged, or it lost its labels: relabel()), else AlreadyExists: another's object
  // is never adopted or overwritten. *created (when given): whether this call made it.
  StatusOr<nlohmann::json> create_child(const kube::Resource& r, const nlohmann::json& want,
                                        const ObservedJob& job, bool* created = nullptr);
  // `have` (the job's own child) with `labels` merged into its labels (a patch guarded by its
  // resourceVersion), written through, logged, one Relabeled Event; `have` itself when `labels`
  // is empty.
  StatusOr<nlohmann::json> relabel(const kube::Resource& r, const nlohmann::json& have,
                                   const nlohmann::json& labels, const ObservedJob& job);
  // Re-labels the job's strays (see the top); a stray that is gone or not the job's is forgotten.
  Status adopt_strays(const ObservedJob& job);
  static Status foreign(const std::string& kind, const std::string& name);
  // Creates `want` (a desired object) when the cache has none of its name; applies it when the
  // job's own copy differs (child_digest(), cache.h); a foreign object of the name is
  // AlreadyExists (foreign()).
  Status ensure_child(const kube::Resource& r, const nlohmann::json& want, const ObservedJob& job);
  Status reconcile_configmap(const JobView& job);
  // The ServiceAccount, Role and RoleBinding of desired.h, in that order.
  Status reconcile_identity(const JobView& job);
  Status reconcile_service(const JobView& job);
  // The job's Secret (see the top): AlreadyExists, with the message for the
  // job's condition, when a Secret of its name is not the job's.
  Status reconcile_secret(const JobView& job);
  // The job's NetworkPolicy: ensure_child() while options.pod.network_policy.enabled, else the
  // job's own one deleted.
  Status reconcile_network_policy(const JobView& job);
  // Merge-patches the live Service `want` names back to want's spec (ports, selector, type).
  Status restore_service(const kube::Resource& r, const nlohmann::json& want,
                         const ObservedJob& job);
  Status reconcile_pods(const JobView& job, const std::vector<Pod>& pods, Outcome* outcome);
  Status create_pods(const JobView& job,
                     const std::vector<std::pair<const RoleView*, int>>& missing, Outcome* outcome);
  Status delete_pods(const ObservedJob& job, std::vector<const Pod*> pods, const std::string& why);
  Status write_status(const ObservedJob& job, const Outcome& outcome);
  // PodsPending (pods_pending.h) from the job's live pods into *o; a Warning Event when it turns
  // True.
  void report_pending(const JobView& job, const std::vector<const Pod*>& live, Outcome* o);

  // Kueue (kueue.h; reconcile_kueue.cc). Whether the job waits for Kueue: options.kueue and its
  // queue label.
  bool kueue_managed(const JobView& job) const;
  // With options.kueue. A job without a queue label: its Workload, if any, deleted. Else the
  // job's Workload made, replaced, requeued after an eviction, or read: *o gets the mirrored
  // conditions and, while the job is held, hold()'s reason and message; *run (a copy of `job`)
  // gets the admission's placement in each role's podTemplate. AlreadyExists when a Workload of
  // its name is not the job's; a ResourceFlavor that cannot be read, or whose node labels
  // conflict, is an error (the pass is retried).
  Status reconcile_workload(const JobView& job, const std::vector<Pod>& pods, Outcome* o,
                            JobView* run);
  Status create_workload(const JobView& job, Outcome* o);
  // The Workload's priority class (kueue.h named_priority()) with its value read by name.
  StatusOr<std::optional<WorkloadPriority>> workload_priority(const JobView& job);
  Status place_pods(const WorkloadView& workload, JobView* run);
  // Held for Kueue: phase Queued with `reason` and `message` (one log line per message).
  void hold(const JobView& job, const std::string& reason, const std::string& message, Outcome* o);
  // o's mirrored conditions, and an Event for each that changed status.
  void mirror(const JobView& job, const WorkloadView* workload, const std::string& why, Outcome* o);
  // After the pods: the Workload's PodsReady condition from o's counts (waitForPodsReady).
  Status report_pods_ready(const JobView& job, const Outcome& o);
  // The job Succeeded or Failed: its Workload's Finished condition (the quota released).
  Status finish_workload(const JobView& job, const std::string& phase, const std::string& message);
  // Deletes the job's own Workload (refused or replaced job), with an Event saying `why`.
  Status remove_workload(const ObservedJob& job, const std::string& why);

  void event(const ObservedJob& job, const std::string& type, const std::string& reason,
             const std::string& message);

  kube::KubeClient* const client_;
  Cache* const cache_;
  EventRecorder* const events_;
  const Clock* const clock_;
  const ReconcilerOptions options_;

  std::mutex warned_mu_;
  std::set<std::string> warned_;  // "<pod uid> <annotation>" reported unreadable; guarded by
                                  // warned_mu_
};

}  // namespace tlt::controller
