// Lease-based leader election (coordination.k8s.io/v1 Lease), as client-go's leaderelection:
// one replica holds the Lease and renews it every retry period; the others look every retry
// period and take it over once it has not been renewed for leaseDurationSeconds. "Not renewed"
// is judged by when this replica saw the record last change on its own clock (not by the
// holder's renewTime), so clock skew between replicas does not matter. Writes are merge patches
// guarded by resourceVersion: of two replicas racing for an expired Lease, one wins.
//
// Thread safety: one thread drives an elector; metrics may be read from anywhere.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/controller/clock.h"
#include "kube/client.h"

namespace tlt::controller {

struct LeaderOptions {
  std::string namespace_ = "default";
  std::string name = "tlt-operator";
  std::string identity;  // unique per replica: the pod name, or host_pid
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds renew_deadline{10};  // a leader that cannot renew for this long steps down
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  // `client` and `clock` are borrowed.
  LeaderElector(kube::KubeClient* client, const Clock* clock, LeaderOptions options);

  // One attempt to acquire or renew: true while this replica holds the Lease, false while
  // another valid holder does; an error when the apiserver could not be asked or the write lost
  // a race (Aborted).
  StatusOr<bool> try_acquire_or_renew();
  // Blocks until this replica leads (true) or `stop` is set (false).
  bool acquire(const std::atomic<bool>& stop);
  // Renews until `stop` is set (then releases the Lease and returns true), another replica took
  // the Lease, or no renewal succeeded for renew_deadline (returns false: leadership is lost and
  // the caller must stop acting at once). The deadline holds even while a renewal request hangs
  // (a partition): renewals run on a helper thread and hold() stops waiting for one at the
  // deadline, so with renew_deadline < lease_duration this replica has stepped down before any
  // other can take the Lease. After it returns false, the elector must not be used again.
  bool hold(const std::atomic<bool>& stop);
  // Gives the Lease up (holderIdentity "") so another replica takes over at once.
  void release();

  // RFC 3339 with microseconds, as metav1.MicroTime: "2025-01-02T03:04:05.123456Z".
  static std::string micro_time(WallTime t);

 private:
  nlohmann::json lease_spec(const nlohmann::json& old, WallTime now) const;

  kube::KubeClient* const client_;
  const Clock* const clock_;
  const LeaderOptions options_;
  nlohmann::json observed_spec_;  // the last record seen
  WallTime observed_at_{};        // when it was seen to change, on this clock
};

}  // namespace tlt::controller
