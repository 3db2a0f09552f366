// An informer: list + watch of one resource type into an ObjectStore (cache.h), telling the
// controller about every object that was listed, came, changed or went (client-go's reflector +
// shared informer, without the resync period: reconciles are level-triggered and requeue
// themselves).
//
// It lists first (the store is replaced by the list, and every listed object is reported), then
// watches from the list's resourceVersion with bookmarks; a watch that the server ends is
// resumed from the last resourceVersion seen; a 410 Gone re-lists at once, any other error (an
// apiserver restart) re-lists after a backoff (1 s doubling to 30 s). The store is updated
// before `on_object` is called, so the reconcile an event causes sees the event's object.
//
// Thread safety: run_informer() blocks; run each informer on its own thread. The store and the
// callbacks must be safe to use from that thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "operator/controller/cache.h"
#include "operator/controller/metrics.h"

namespace tlt::controller {

struct InformerOptions {
  kube::Resource resource;          // the type and namespace ("" for all) to list and watch
  std::string label_selector;       // owned_selector() for the owned types; "" for the jobs
  int watch_timeout_seconds = 120;  // the server ends each watch after this; then we resume
};

// Runs the informer until `stopping` is true (checked between events and while backing off; a
// watch blocked on a silent connection returns at its timeout). `client`, `store`, `metrics` and
// `stopping` are borrowed and must outlive the call. `on_object` gets each listed object and the
// object of each ADDED, MODIFIED and DELETED event; `metrics` counts watch restarts.
void run_informer(kube::KubeClient* client, ObjectStore* store, const InformerOptions& options,
                  const std::function<void(const nlohmann::json&)>& on_object,
                  OperatorMetrics* metrics, const std::atomic<bool>& stopping);

}  // namespace tlt::controller
