// The names shared by the operator and the runtime pods it creates: the labels that say which
// job, role and replica a pod is, and the annotations through which the two talk.
//
//   tlt.dev/assignment  written by the operator's rebalancer on a rollout pod: "drafter" while
//                       the pod is assigned to drafter training, absent otherwise. The runtime
//                       reads it at each step boundary.
//   tlt.dev/progress    written by the runtime on its pod: a JSON object of the job's progress
//                       (RL: step, reward, reclaimedGPUSeconds, idleGPUSeconds, drafterVersion,
//                       acceptLength; TST: step, loss, evalLoss, trainingPhase, tokensSeen; both:
//                       time, RFC 3339). The operator copies it into the job's status.
//
// Pod names are part of the contract too: the operator names a job's pods pod_name(job, role, i)
// (roles rollout, trainer, drafter; workers), and the runtime finds its peers by them
// (<pod>.<service>, the job's headless Service): the trainer <job>-trainer-0, TST rank 0
// <job>-workers-0.
#pragma once

#include <string>

namespace tlt::api {

inline std::string pod_name(const std::string& job, const std::string& role, int index) {
  return job + "-" + role + "-" + std::to_string(index);
}

inline constexpr const char* kJobLabel = "tlt.dev/job";
inline constexpr const char* kRoleLabel = "tlt.dev/role";
inline constexpr const char* kIndexLabel = "tlt.dev/index";
inline constexpr const char* kAssignmentAnnotation = "tlt.dev/assignment";
inline constexpr const char* kAssignedToDrafter = "drafter";
inline constexpr const char* kProgressAnnotation = "tlt.dev/progress";

}  // namespace tlt::api
