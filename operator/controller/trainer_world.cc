// The running trainer group's world size, and the condition that tells a user it is kept.
#include "operator/controller/trainer_world.h"

#include <algorithm>

#include "operator/controller/job_status.h"

namespace tlt::controller {
namespace {

// A world label's value: a whole number in [1, 4096] (spec.roles.trainer.replicas' range), else
// nullopt.
std::optional<int32_t> parse_world(const std::string& s) {
  if (s.empty() || s.size() > 4 || !std::all_of(s.begin(), s.end(), ::isdigit)) return std::nullopt;
  int v = std::stoi(s);
  if (v < 1 || v > 4096) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int32_t> running_trainer_world(const std::vector<TrainerPod>& pods) {
  std::optional<int32_t> world;
  int at = -1;
  for (const TrainerPod& p : pods) {
    std::optional<int32_t> w = parse_world(p.world_label);
    if (!w || (world && p.index >= at)) continue;
    world = w;
    at = p.index;
  }
  return world;
}

JobView with_trainer_world(JobView job, int32_t world) {
  for (RoleView& role : job.roles) {
    if (role.name != "trainer") continue;
    role.replicas = world;
    nlohmann::json& spec = job.document["spec"];
    spec["roles"]["trainer"]["replicas"] = world;
  }
  return job;
}

nlohmann::json trainer_scale_condition(const nlohmann::json& stored_status, int32_t replicas,
                                       int32_t world, int64_t generation, const std::string& now) {
  const std::string r = std::to_string(replicas), w = std::to_string(world);
  if (replicas == world) {
    return make_condition(stored_status, kTrainerScalePending, false, "WorldMatchesSpec",
                          "The trainer group runs spec.roles.trainer.replicas (" + r + ") ranks.",
                          generation, now);
  }
  return make_condition(
      stored_status, kTrainerScalePending, true, "WorldSizeFixed",
      "spec.roles.trainer.replicas is " + r + ", but the running trainer group has " + w +
          " ranks and its world size cannot change while it runs: " + w +
          " trainer pods are kept. The change takes effect when the job is suspended and resumed "
          "(spec.suspend: true, then false) or deleted and "
          "created again.",
      generation, now);
}

}  // namespace tlt::controller
