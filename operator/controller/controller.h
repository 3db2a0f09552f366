// The controller: watches RLJobs, TSTPretrainJobs and the pods they own (label tlt.dev/job),
// turns every event into the owning job's key on a rate-limited work queue, and runs workers that
// reconcile one key at a time each.
//
// Watches list first (every job is reconciled at start and after every re-list), then watch from
// the list's resourceVersion with bookmarks; a watch that ends is resumed from the last
// resourceVersion seen; a 410 Gone, or any error (an apiserver restart), re-lists after a backoff
// (1 s doubling to 30 s). Reconciles are level-triggered, so a re-list that replays everything
// is harmless: pod names are deterministic, an existing pod is never created twice.
//
// Thread safety: start() once; stop() from any thread. The watch threads are detached (they may
// be blocked in a long poll) and share only reference-counted state, so stop() need not wait
// for them.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/clock.h"
#include "operator/controller/desired.h"
#include "operator/controller/metrics.h"
#include "operator/controller/work_queue.h"
#include "operator/kube/client.h"

namespace tlt::controller {

struct ControllerOptions {
  std::string namespace_;  // "" watches every namespace
  int workers = 2;
  PodOptions pod;
  RateLimitOptions rate;
  int watch_timeout_seconds = 120;  // the server ends each watch after this; then we resume
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
  // "" once every watch has listed once, else which has not.
  std::string not_ready() const;

  // Implementation detail, shared with the detached watch threads.
  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> workers_;
  bool started_ = false;
};

}  // namespace tlt::controller
