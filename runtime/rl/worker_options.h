// The options a rollout worker is set up with: the one codec of the `setup` message
// (runtime/rl/worker.h), written by the driver (runtime/rl/run.cc) and read by the worker
// (runtime/rl/worker.cc).
//
// WorkerSpec is the job spec's part (spec.speculative, spec.drafter), the same for every worker:
// worker_spec_from is its one conversion from the spec, and RLRunPlan::worker carries it.
// WorkerOptions adds what the driver decides per job (the policy's shape, the engine's size,
// seeds, precision) and per worker (index, directory, CPU).
//
// Errors: worker_options_from_json returns InvalidArgument naming the field that is missing or
// of the wrong type ("setup message: field \"arms\": ..."); nothing else is checked here (the
// engine refuses values it cannot run).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/spec.h"
#include "api/status.h"

namespace tlt::rl {

// The rollout engine's and the spot drafter trainer's settings from the spec.
struct WorkerSpec {
  int64_t activation_threshold = 8;  // rollout::EngineOptions::activation_threshold
  std::vector<std::string> arms{"4_1_5", "ngram"};
  int32_t ngram_shortcut = 3;          // rollout::EngineOptions::ngram_shortcut
  double draft_confidence = 0.0;       // rollout::EngineOptions::draft_confidence
  int32_t drafter_catch_up_limit = 8;  // rollout::EngineOptions::drafter_catch_up_limit
  std::string selector = "bucketed-epsilon-greedy";
  std::vector<int32_t> buckets{1, 2, 5};
  double epsilon = 0.1;
  int32_t window = 32;
  std::string selector_value = "throughput";     // rollout::EngineOptions::selector_value
  std::string selector_exploration = "uniform";  // rollout::EngineOptions::selector_exploration
  int64_t drafter_layers = 1;
  int64_t drafter_train_levels = 3;  // drafter::DrafterTrainer's levels, warm start and online
  bool drafter_fused = false;        // spec.drafter.features == "fused" (model::DrafterFeatures)
  // Workers draft over the this-many tokens they have generated most often (0: all).
  int64_t drafter_vocab_subset = 0;
  double drafter_learning_rate = 3e-4;
  int64_t drafter_batch = 16;  // windows per spot-training step
};

// spec.speculative and spec.drafter as the workers take them.
WorkerSpec worker_spec_from(const api::RLJobSpec& spec);

struct WorkerOptions {
  int index = 0;    // the worker's slot; its engine seeds from seed + index
  std::string dir;  // the run directory: buffers are written under dir/buffer
  int core = -1;    // the CPU the worker pins itself to (-1: none)
  // The policy's architecture: a pretrained model's card (model::model_card_json; its
  // architecture only), or when empty the preset `preset` with vocabulary `vocab`.
  std::string preset;
  int64_t vocab = 0;
  std::string model_card;
  int64_t max_seq = 0;            // positions the engine is sized for (capped by the model's)
  int64_t max_batch = 0;          // rows the engine is sized for
  uint64_t seed = 0;              // the engines' base seed
  bool decode_bfloat16 = false;   // rollout::EngineOptions::bfloat16
  bool drafter_bfloat16 = false;  // the spot trainer's matrix products
  // The drafter warm start's draft vocabulary (a pretrained model's); empty: none.
  std::vector<int64_t> drafter_vocab_ids;
  WorkerSpec spec;
};

// The setup message ({"op": "setup", ...}).
nlohmann::json to_json(const WorkerOptions& o);
// Reads a setup message; "op" is not checked.
StatusOr<WorkerOptions> worker_options_from_json(const nlohmann::json& m);

}  // namespace tlt::rl
