// The level-triggered reconciler of RLJob and TSTPretrainJob. One call looks at the job and its
// pods as they are now and moves them one step toward the spec; it keeps no memory between calls
// (everything it needs is in the job's status and its pods), so a restarted operator, a missed
// watch event or a duplicate one changes nothing.
//
// reconcile(key), in a fixed order:
//   observe   get the job; gone -> done. Being deleted -> delete what it owns (pods, Service,
//             ConfigMap: no garbage collector is assumed), drop the finalizer, done.
//   finalizer add tlt.dev/cleanup (a merge patch guarded by resourceVersion).
//   validate  decode + validate with api/; invalid -> status Failed, reason InvalidSpec, the
//             message naming the fields; no pods; no requeue (retrying cannot fix it).
//   finished  Succeeded or Failed is kept: pods still running are deleted; after
//             ttlSecondsAfterFinished the job itself is deleted (requeued until then).
//   act       ConfigMap <job>-spec and Service <job> (applied when missing or different), then
//             pods: Failed pods are deleted and counted in status.restarts (Failed once restarts
//             exceed backoffLimit); every pod of the completion role (trainer; workers)
//             Succeeded -> Succeeded; spec.suspend -> delete every pod; else create missing
//             pods and delete surplus ones (highest index first).
//   status    computed on a copy (job_status.h), patched only when it changed.
// Each decision is one log line and one Event; the first error stops the pass and is returned
// (the caller retries with backoff).
//
// Thread safety: reconcile() may run concurrently for different keys (the work queue never hands
// one key to two workers); the client must be thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/controller/clock.h"
#include "operator/controller/desired.h"
#include "operator/controller/job.h"
#include "operator/controller/job_status.h"
#include "operator/kube/client.h"

namespace tlt::controller {

struct ReconcileResult {
  Status status;                                      // not OK: retry with backoff
  std::optional<std::chrono::seconds> requeue_after;  // set: look again after this long
  std::string phase;  // the job's phase after this pass; "" when the job is gone
};

class Reconciler {
 public:
  // `client` and `clock` are borrowed and must outlive the reconciler.
  Reconciler(kube::KubeClient* client, const Clock* clock, PodOptions options);

  // Reconciles the job of `key` ("RLJob/ns/name"). InvalidArgument for a malformed key.
  ReconcileResult reconcile(const std::string& key);

 private:
  struct Pod {
    nlohmann::json object;
    std::string name, role, phase;
    int index = -1;
    bool deleting = false, ready = false;
  };

  ReconcileResult reconcile_job(const std::string& kind, const nlohmann::json& object);
  Status finalize(const ObservedJob& job);
  Status ensure_finalizer(const ObservedJob& job);
  ReconcileResult invalid_spec(const ObservedJob& job, const Status& why);
  StatusOr<std::vector<Pod>> observe_pods(const ObservedJob& job);
  ReconcileResult finished(const JobView& job, const std::vector<Pod>& pods);
  Status reconcile_configmap(const JobView& job);
  Status reconcile_service(const JobView& job);
  Status reconcile_pods(const JobView& job, const std::vector<Pod>& pods, Outcome* outcome);
  Status delete_pods(const ObservedJob& job, std::vector<const Pod*> pods, const std::string& why);
  Status write_status(const ObservedJob& job, const Outcome& outcome);
  void event(const ObservedJob& job, const std::string& type, const std::string& reason,
             const std::string& message);

  kube::KubeClient* const client_;
  const Clock* const clock_;
  const PodOptions options_;
};

}  // namespace tlt::controller
