// The controller: informers (list + watch into the cache, informer.h) for RLJobs,
// TSTPretrainJobs and the objects they own (owned_selector(), desired.h; those informers start
// once the jobs have listed, and the cache keeps only children of known jobs, cache.h); every
// object that comes, changes or goes puts its job's key (the job's own at once, or its controller
// ownerReference's after options.owned_event_delay) on a rate-limited work queue; workers reconcile
// one key at a time each, all on one Reconciler that reads the cache. Events are written in the
// background (AsyncEventRecorder).
//
// Workers start taking keys once every informer has listed (the cache is synced), as
// controller-runtime's do. Informers re-list after a 410 Gone or an error (an apiserver restart)
// and every listed object is requeued; reconciles are level-triggered, so a re-list that replays
// everything is harmless: pod names are deterministic, an existing pod is never created twice.
//
// RBAC: list and watch on rljobs, tstpretrainjobs, pods, services and configmaps in the watched
// namespaces (tests/operator/rbac.yaml); with options.kueue also workloads (kueue.x-k8s.io).
//
// Thread safety: start() once; stop() from any thread. The informer and event-writer threads are
// detached (they may be blocked in a long poll) and share only reference-counted state, so stop()
// need not wait for them.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/cache.h"
#include "operator/controller/clock.h"
#include "operator/controller/desired.h"
#include "operator/controller/metrics.h"
#include "operator/controller/work_queue.h"
#include "kube/client.h"

namespace tlt::controller {

struct ControllerOptions {
  std::string namespace_;  // "" watches every namespace
  int workers = 2;
  PodOptions pod;
  RateLimitOptions rate;
  int watch_timeout_seconds = 120;  // the server ends each watch after this; then we resume
  int max_parallel_creates = 5;     // a job's missing pods created this many at a time
  // An event on an owned object (a pod turning Running) queues its job this much later, so that
  // the events of a job's pods, which come in bursts, make one reconcile and one status write.
  // Events on the jobs themselves queue them at once.
  std::chrono::milliseconds owned_event_delay{100};
  // Kueue's job-framework contract (kueue.h): Workloads are watched (the operator's own, by
  // owned_selector()) and cached, and jobs labelled kueue.x-k8s.io/queue-name wait for admission.
  bool kueue = false;
  std::chrono::seconds pods_pending_timeout{300};  // ReconcilerOptions::pods_pending_timeout
};

class Controller {
 public:
  Controller(std::shared_ptr<kube::KubeClient> client, std::shared_ptr<OperatorMetrics> metrics,
             ControllerOptions options);
  ~Controller();  // stop()s
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the watches and the workers and returns.
  void start();
  // Stops the workers (after their current reconcile) and tells the watches to end.
  void stop();
  // "" once every informer has listed once (the cache is synced), else which have not.
  std::string not_ready() const;
  // The informer cache (jobs, and the pods, Services and ConfigMaps they own), for other readers
  // in the process (the rebalancer could list jobs and pods here instead of the apiserver). Filled
  // once start() has run and not_ready() is ""; owned by the controller, thread-safe.
  const Cache& cache() const;

  // Implementation detail, shared with the detached watch threads.
  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> workers_;
  bool started_ = false;
};

}  // namespace tlt::controller
