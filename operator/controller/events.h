// Where the reconciler's Events go (client-go's EventRecorder). An Event is a record for
// people (`kubectl describe`, `kubectl get events`), not state: one that cannot be written is
// logged and dropped, and the decision it describes stands.
//
//   SyncEventRecorder   writes each Event before record() returns (unit tests, tools);
//   AsyncEventRecorder  queues Events and writes them from background threads, so a reconcile
//                       never waits on them (client-go's broadcaster does the same).
//
// Thread safety: record() may be called from any thread, on both.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "operator/controller/clock.h"
#include "operator/controller/job.h"
#include "kube/client.h"

namespace tlt::controller {

class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  // Records an Event about `job` of `type` Normal or Warning with a CamelCase `reason` and a
  // sentence. Never fails (see the top).
  virtual void record(const ObservedJob& job, const std::string& type, const std::string& reason,
                      const std::string& message) = 0;
};

class SyncEventRecorder : public EventRecorder {
 public:
  // `client` and `clock` are borrowed and must outlive the recorder; `component` is the Event's
  // source.component.
  SyncEventRecorder(kube::KubeClient* client, const Clock* clock, std::string component);
  void record(const ObservedJob& job, const std::string& type, const std::string& reason,
              const std::string& message) override;

 private:
  kube::KubeClient* const client_;
  const Clock* const clock_;
  const std::string component_;
};

class AsyncEventRecorder : public EventRecorder {
 public:
  // `clock` is borrowed and must outlive the recorder (it is read in record(), on the caller's
  // thread). At most `capacity` Events wait; more are dropped with a log line. `writers`
  // threads write them, in the order recorded when writers is 1.
  AsyncEventRecorder(std::shared_ptr<kube::KubeClient> client, const Clock* clock,
                     std::string component, size_t capacity = 1000, int writers = 2);
  ~AsyncEventRecorder() override;  // shut_down(0)
  AsyncEventRecorder(const AsyncEventRecorder&) = delete;
  AsyncEventRecorder& operator=(const AsyncEventRecorder&) = delete;

  void record(const ObservedJob& job, const std::string& type, const std::string& reason,
              const std::string& message) override;
  // Takes no more Events, waits up to `drain` for the queued ones to be written, then lets the
  // writers go: a writer still blocked on the apiserver ends on its own (it holds only shared
  // state), so this returns after `drain` at the latest.
  void shut_down(std::chrono::milliseconds drain);
  // Events recorded and not yet written (or dropped at shut_down).
  size_t pending() const;

  struct State;  // shared with the writer threads

 private:
  const Clock* const clock_;
  const std::string component_;
  std::shared_ptr<State> state_;
};

}  // namespace tlt::controller
