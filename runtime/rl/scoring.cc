#include "runtime/rl/scoring.h"

#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "api/json_bounded.h"

namespace tlt::rl {

StatusOr<std::unique_ptr<reward::Scorer>> make_run_scorer(const RLRunPlan& plan, const Task& task) {
  reward::ScorerOptions o;
  o.spec = plan.reward;
  o.dataset = plan.task.has_dataset();
  // A generated task's reward reads the problem's prompt and answer, which the request carries
  // (score_request): the problem is rebuilt from them.
  const Task* t = &task;
  o.task_reward = [t](const reward::ScoreRequest& r) {
    Problem p;
    p.prompt = r.prompt;
    StatusOr<nlohmann::json> answer = api::parse_json_bounded(r.reference_json, r.id);
    p.answer = answer.ok() && answer->is_string() ? answer->get<std::string>() : r.reference_json;
    return t->reward(p, r.response);
  };
  if (const char* dir = std::getenv("TLT_REWARD_PIPE_DIR"); dir && *dir) o.pipe_dir = dir;
  return reward::make_scorer(o);
}

reward::ScoreRequest score_request(const Problem& p, std::string id, std::string response) {
  reward::ScoreRequest r;
  r.id = std::move(id);
  r.prompt = p.prompt;
  r.response = std::move(response);
  r.reference_json = p.reference_json.empty() ? nlohmann::json(p.answer).dump() : p.reference_json;
  r.fields_json = p.fields_json;
  return r;
}

std::string step_request_id(int64_t step, int64_t index) {
  return "s" + std::to_string(step) + "-" + std::to_string(index);
}

std::string held_out_request_id(int64_t problem, int64_t sample) {
  return "heldout-" + std::to_string(problem) + "-" + std::to_string(sample);
}

bool serial_scoring() {
  const char* v = std::getenv("TLT_REWARD_SERIAL");
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace tlt::rl
