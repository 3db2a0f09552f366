#include "runtime/rl/checkpoint.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/io/atomic_file.h"
#include "runtime/model/checkpoint.h"

namespace tlt::rl {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Removes all but the newest `keep` step-N directories under root.
void keep_newest(const std::string& root, int64_t keep) {
  std::error_code ec;
  std::vector<int64_t> have;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0) have.push_back(std::atoll(name.c_str() + 5));
  }
  std::sort(have.begin(), have.end());
  for (size_t i = 0; i + size_t(keep) < have.size(); ++i)
    fs::remove_all(root + "/step-" + std::to_string(have[i]), ec);
}

}  // namespace

Status save_rl_checkpoint(const std::string& root, int64_t keep, const RLCheckpointState& state,
                          const PolicyTrainer& trainer, const model::Drafter& drafter,
                          const model::ModelCard& card) {
  std::string dir = root + "/step-" + std::to_string(state.step);
  TLT_RETURN_IF_ERROR(trainer.save(dir, "rl step " + std::to_string(state.step)));
  // The policy's architecture and tokenizer beside step-N/, so `tlt export` reads it back.
  TLT_RETURN_IF_ERROR(model::write_model_card(root, card));
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*drafter, dir + "/drafter.ckpt",
                                             "drafter v" + std::to_string(state.drafter_version)));
  json steps = json::array();
  for (const StepReport& s : state.steps) steps.push_back(to_json(s));
  json j = {{"step", state.step},
            {"drafterVersion", state.drafter_version},
            {"heldOutBefore", state.held_out_before},
            {"heldOutBeforePerProblem", state.held_out_before_per_problem},
            {"heldOutMarkedBefore", state.held_out_marked_before},
            {"steps", steps}};
  TLT_RETURN_IF_ERROR(io::atomic_write(dir + "/state.json", j.dump() + "\n"));
  // `latest` names a complete step directory only once everything in it is in place.
  TLT_RETURN_IF_ERROR(
      io::atomic_write(root + "/latest", "step-" + std::to_string(state.step) + "\n"));
  keep_newest(root, keep);
  return Status::Ok();
}

bool rl_checkpoint_exists(const std::string& root) {
  std::ifstream latest(root + "/latest");
  std::string name;
  return !root.empty() && static_cast<bool>(latest >> name);
}

StatusOr<RLCheckpointState> load_rl_checkpoint(const std::string& root, PolicyTrainer& trainer,
                                               model::Drafter& drafter, std::string* dir_out) {
  std::ifstream latest(root + "/latest");
  std::string name;
  if (!(latest >> name))
    return Status::NotFound("no checkpoint to resume under " + root +
                            " (spec.checkpoint.path); run without --resume to start over");
  std::string dir = root + "/" + name;
  *dir_out = dir;
  StatusOr<std::string> meta = trainer.load(dir);
  if (!meta.ok()) return meta.status().with_context("resume from " + dir);
  StatusOr<std::string> dm = model::load_checkpoint(*drafter, dir + "/drafter.ckpt");
  if (!dm.ok()) return dm.status().with_context("resume from " + dir);
  std::ifstream f(dir + "/state.json");
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("step"))
    return Status::Corruption(dir + "/state.json is not a tlt RL state; delete " + dir +
                              " to resume from an older checkpoint");
  RLCheckpointState state;
  try {
    state.step = j.at("step");
    state.drafter_version = j.at("drafterVersion");
    state.held_out_before = j.at("heldOutBefore");
    if (j.contains("heldOutBeforePerProblem"))
      j.at("heldOutBeforePerProblem").get_to(state.held_out_before_per_problem);
    state.held_out_marked_before = j.value("heldOutMarkedBefore", -1.0);
    for (const json& s : j.at("steps")) state.steps.push_back(step_from_json(s));
  } catch (const json::exception& e) {
    return Status::Corruption(dir + "/state.json: " + e.what());
  }
  return state;
}

}  // namespace tlt::rl
