// Pods that stay Pending, with or without Kueue: after `timeout` the job's condition PodsPending
// turns True, naming the pods and the scheduler's reason (their PodScheduled condition, e.g.
// "Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu"). The operator keeps
// the pods (the scheduler keeps trying; deleting them would only lose their place) and records
// one Warning Event when the condition turns True; it turns False (reason NoPodsPending) once no
// pod is Pending past the timeout. The condition is written only once it has been True: a job
// whose pods always scheduled never carries it. All-or-nothing admission (a job whose pods do
// not all start within a deadline gives back the ones that did) is Kueue's waitForPodsReady
// (kueue.h, docs/kueue.md).
//
// Thread safety: stateless functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/controller/clock.h"

namespace tlt::controller {

inline constexpr const char* kPodsPendingCondition = "PodsPending";

// A pod as far as this rule is concerned.
struct PendingPod {
  std::string name;
  std::string phase;                // Pending, Running, ...
  std::optional<WallTime> created;  // metadata.creationTimestamp
  std::string unscheduled_reason;   // PodScheduled False: its reason ("" when scheduled)
  std::string unscheduled_message;  // and message
};

struct PendingReport {
  // The condition to write (null: none; the stored one, if any, is kept as it is).
  nlohmann::json condition;
  bool turned_true = false;  // True now, not True in the stored status: tell it (Event)
  // When a pod Pending under the timeout reaches it: look again after this long.
  std::optional<std::chrono::seconds> recheck_after;
};

// The report for `pods` (the job's, not being deleted) at `now`, against the stored job status.
PendingReport pods_pending(const std::vector<PendingPod>& pods, WallTime now,
                           std::chrono::seconds timeout, const nlohmann::json& stored_status,
                           int64_t generation);

}  // namespace tlt::controller
