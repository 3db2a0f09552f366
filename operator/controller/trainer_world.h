// An RLJob's trainer group: its trainer pods are the ranks of one c10d group whose world size
// each pod is given when it is made (TLT_TRAINER_WORLD and the label kTrainerWorldLabel,
// desired.h). A running group cannot change its world, so a change of
// spec.roles.trainer.replicas while trainer pods exist is not applied: the reconciler keeps
// making, restarting and counting the trainer pods of the running world, and condition
// TrainerScalePending (True, reason WorldSizeFixed) says so, naming the field. The change takes
// effect once no trainer pod is left: when the job is suspended and resumed (spec.suspend true,
// then false), or deleted and created again. Then the condition turns False (reason
// WorldMatchesSpec).
//
// Thread safety: stateless functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/controller/job.h"

namespace tlt::controller {

inline constexpr const char* kTrainerScalePending = "TrainerScalePending";

// One trainer pod that exists and is not being deleted: its index and its label
// kTrainerWorldLabel as written ("" when absent).
struct TrainerPod {
  int index = -1;
  std::string world_label;
};

// The world the running trainer group was made with: the label of the lowest-index pod whose
// label is a whole number in [1, 4096]; nullopt when no pod carries one (none exists, or pods
// made before the label).
std::optional<int32_t> running_trainer_world(const std::vector<TrainerPod>& pods);

// `job` as the pods are made: the trainer role's replicas, and spec.roles.trainer.replicas of its
// document (the ConfigMap's job.json, which the runtime reads), set to `world`. An RLJob without
// a trainer role is returned unchanged.
JobView with_trainer_world(JobView job, int32_t world);

// Condition TrainerScalePending for a job whose spec asks for `replicas` trainer pods while the
// group runs `world` ranks: True (WorldSizeFixed) when they differ, else False
// (WorldMatchesSpec); kept stored at generation `generation` with make_condition's rules.
nlohmann::json trainer_scale_condition(const nlohmann::json& stored_status, int32_t replicas,
                                       int32_t world, int64_t generation, const std::string& now);

}  // namespace tlt::controller
