// The status a reconcile writes, computed on a copy from what the pod sub-reconciler saw and
// did, as a pure function (so the "only patch when changed" rule is a plain comparison).
//
// The operator owns these status fields: phase, observedGeneration, conditions, roles (RLJob) or
// workers (TSTPretrainJob), restarts, startTime, completionTime, and the progress fields it
// copies from the pods' reports (progress.h: step, reward, reclaimedGPUSeconds, idleGPUSeconds,
// drafter; step, loss, evalLoss, trainingPhase, tokensSeen). Conditions of other types belong to
// the rebalancer.
//
// Phase: Failed or Succeeded (terminal, kept once reached), else Blocked (a child refused by the
// apiserver: Outcome::blocked_reason), else Suspended, else Queued (held for Kueue:
// Outcome::queued_reason), else Running when
// every desired pod is running and ready, else Pending. Every one of the five conditions
// (Created, Running, Suspended, Succeeded, Failed) is always present, True or False, with a
// CamelCase reason and a sentence; lastTransitionTime changes only when its status changes.
// An RLJob's TrainerScalePending (trainer_world.h) is written when the trainer group's world
// differs from the spec's, or to turn a stored one False. Conditions of other types (the
// rebalancer's) are carried over from `old` unchanged.
//
// Thread safety: stateless functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/controller/clock.h"
#include "operator/controller/progress.h"

namespace tlt::controller {

struct RoleCounts {
  int32_t replicas = 0;   // pods that exist and are not being deleted
  int32_t ready = 0;      // running with condition Ready
  int32_t succeeded = 0;  // phase Succeeded
  int32_t failed = 0;     // phase Failed (seen in this reconcile, then deleted)
};

// What a reconcile found and did.
struct Outcome {
  std::string terminal;          // "", "Succeeded" or "Failed"
  std::string terminal_reason;   // BackoffLimitExceeded, InvalidSpec, AllPodsSucceeded
  std::string terminal_message;  // a sentence
  bool suspended = false;
  bool created = false;  // the ConfigMap, Service and every desired pod exist
  // The apiserver refused a write of a child ("" when none was): its reason (Forbidden,
  // Invalid, AlreadyExists...) and message. Phase Blocked, condition Created False.
  std::string blocked_reason, blocked_message;
  int32_t restarts = 0;  // pod failures so far (status.restarts)
  int32_t desired_pods = 0;
  std::map<std::string, RoleCounts> roles;  // by role name
  std::optional<Progress> progress;         // the leading pod's report, if any pod reported
  // Held for Kueue (kueue.h): phase Queued, the Running condition False with this reason and
  // message; "" when not held.
  std::string queued_reason, queued_message;
  // Conditions decided by this pass beyond the five, by type: the Workload's mirrored
  // (QuotaReserved, Admitted, Evicted; kueue.h) and PodsPending (pods_pending.h). Each replaces
  // the stored one of its type; a stored type not listed is kept as it is.
  std::vector<std::pair<std::string, nlohmann::json>> extra_conditions;
  // Look at the job again after this long (a Pending pod reaching the PodsPending timeout).
  std::optional<std::chrono::seconds> recheck_after;
  // An RLJob's spec.roles.trainer.replicas and the world its trainer group runs
  // (trainer_world.h); 0 when not looked at, which keeps the stored TrainerScalePending.
  int32_t trainer_replicas = 0, trainer_world = 0;
};

// The operator's fields of a new status: from `old` (the stored status), the outcome, the
// job's metadata.generation and the time now. RLJob puts role counts under "roles", a
// TSTPretrainJob its one role's under "workers".
nlohmann::json compute_status(const std::string& kind, const nlohmann::json& old,
                              const Outcome& outcome, int64_t generation, WallTime now);

// The operator's fields of a stored status (what compute_status would have to match).
nlohmann::json owned_status_fields(const nlohmann::json& status);

// A metav1 condition of `type`; keeps the lastTransitionTime stored in `stored_status` (a job's
// status, or null) while the condition's status is unchanged, else uses `now`.
nlohmann::json make_condition(const nlohmann::json& stored_status, const std::string& type,
                              bool is_true, const std::string& reason, const std::string& message,
                              int64_t generation, const std::string& now);

// Whether writing `computed` would change `old`'s operator-owned fields.
bool status_changed(const nlohmann::json& old, const nlohmann::json& computed);

// The conditions array `stored` with `replace` merged in by type, for a writer that owns some
// condition types (the rebalancer's): a replacement takes the place of the first stored condition
// of its type and drops later ones of that type; one whose type is not stored is appended, in
// `replace`'s order; a null replacement keeps whatever is stored for its type. Conditions of
// other types keep their place.
nlohmann::json merge_conditions(const nlohmann::json& stored,
                                const std::vector<std::pair<std::string, nlohmann::json>>& replace);

// Whether two conditions arrays are equal apart from lastTransitionTime (which only changes with a
// condition's status, so writing the one would not change the other).
bool same_conditions(nlohmann::json a, nlohmann::json b);

}  // namespace tlt::controller
