// Training progress from the runtime pods' reports, for the job's status (step, reward, loss...).
//
// The contract with the runtime: a pod may carry the annotation tlt.dev/progress
// (kProgressAnnotation, job.h) whose value is a JSON object
//   {"step": int, "reward": number, "loss": number, "evalLoss": number,
//    "trainingPhase": "superposition" | "recovery" | "baseline", "tokensSeen": int,
//    "reclaimedGPUSeconds": number, "idleGPUSeconds": number, "drafterVersion": int,
//    "acceptLength": number, "time": "RFC3339"}
// Every key is optional (RL pods write the RL keys, TST pods the TST keys); a null value counts
// as absent (what a JSON writer makes of NaN); unknown keys are ignored, so a newer runtime may
// write more.
//
// The job follows the one pod that reports the highest step (ties: the lead role, trainer or
// workers, then the lowest index); keys that pod leaves out keep their stored values, and a
// report below the stored status.step changes nothing (step never moves backwards; a recreated
// job has a new, empty status).
//
// Thread safety: plain values and stateless functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::controller {

struct Progress {
  std::optional<int64_t> step;                  // >= 0 and < 2^31 (status.step is int32)
  std::optional<double> reward;                 // RL: mean reward of the step
  std::optional<double> loss, eval_loss;        // TST
  std::optional<std::string> training_phase;    // TST: superposition, recovery, baseline
  std::optional<int64_t> tokens_seen;           // TST, >= 0
  std::optional<double> reclaimed_gpu_seconds;  // RL, >= 0
  std::optional<double> idle_gpu_seconds;       // RL, >= 0
  std::optional<int64_t> drafter_version;       // RL, >= 0
  std::optional<double> accept_length;          // RL, >= 0
  std::string time;                             // as written ("" when absent); not interpreted
};

// Parses an annotation value. InvalidArgument saying what is wrong ("step: want an integer
// from 0 to 2147483647, got \"3\"") when the text is not a JSON object or a known key has the
// wrong type or range.
StatusOr<Progress> parse_progress(const std::string& text);

// One pod's readable report.
struct PodProgress {
  std::string pod;   // its name
  std::string role;  // rollout, trainer, drafter; workers
  int index = -1;
  Progress progress;
};

// The report the job follows (see the top): the highest step, ties to `lead_role`, then the
// lowest index, then the name; reports without a step rank below every report with one.
// nullptr when `reports` is empty. The pointer is into `reports`.
const PodProgress* leading_progress(const std::vector<PodProgress>& reports,
                                    const std::string& lead_role);

// The progress fields of a job's status of `kind` (RLJob: step, reward, reclaimedGPUSeconds,
// idleGPUSeconds, drafter {version, acceptLength}; TSTPretrainJob: step, loss, evalLoss,
// trainingPhase, tokensSeen) after `report` (nullptr: none) is applied over `stored` (the stored
// status): an object with only the fields that have a value.
nlohmann::json progress_status(const std::string& kind, const nlohmann::json& stored,
                               const Progress* report);

}  // namespace tlt::controller
