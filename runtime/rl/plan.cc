#include "runtime/rl/plan.h"

namespace tlt::rl {

bool RLRunPlan::trains_drafter(int64_t step) const {
  return !baseline && drafter.training.enabled &&
         (freeze_drafter_after < 0 || step <= freeze_drafter_after);
}

Status RLRunPlan::validate() const {
  if (run_dir.empty()) return Status::InvalidArgument("run directory is empty");
  if (drafter_role_workers < 0 || drafter_role_workers >= workers)
    return Status::InvalidArgument("spec.roles.rollout.replicas must be at least 1 besides " +
                                   std::to_string(drafter_role_workers) + " drafter pods");
  return Status::Ok();
}

}  // namespace tlt::rl
