// The options a rollout worker is set up with: the one codec of the `setup` message
// (runtime/rl/worker.h), written by the driver (runtime/rl/run.cc) and read by the worker
// (runtime/rl/worker.cc).
//
// The job spec's part travels whole: spec.speculative and spec.drafter as api/spec.h has them,
// encoded and decoded by their field tables (api/encode.h, api/decode.h), so a knob has the
// spec's name and default in the message too. They sit under the message's "spec" object, as in
// a manifest: a top-level "drafter" would be taken for a file by a remote worker's Channel
// (runtime/rl/channel.h mirrors the files that "policy", "drafter" and "buffer" name). The other
// fields are what the driver decides per job (the policy's shape, the engine's size, seeds,
// precision) and per worker (index, directory, CPU).
//
// Errors: worker_options_from_json returns InvalidArgument naming the field that is missing or
// of the wrong type ("setup message: field \"max_batch\" ...", "setup message:
// spec.speculative.arms[1]: must be a string ..."); a field of the spec's parts that is absent
// keeps its default. Ranges are not checked here (the engine refuses values it cannot run).
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

struct WorkerOptions {
  int index = 0;    // the worker's slot; its engine seeds from seed + index
  std::string dir;  // the run directory (runtime/rl/run_dir.h)
  int core = -1;    // the CPU the worker pins itself to (-1: none)
  // spec.model.device as written: the worker resolves it where it runs and computes on
  // Placement::process_device(index) (runtime/device/device.h): a local worker its round-robin
  // share of the visible GPUs, a pod the GPU its container was given.
  std::string device = "auto";
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
  api::SpeculativeSpec speculative;  // the engine: rollout::engine_options(speculative)
  api::DrafterSpec drafter;          // the drafter's shape and its spot training
};

// The setup message ({"op": "setup", ...}).
nlohmann::json to_json(const WorkerOptions& o);
// Reads a setup message; "op" is not checked.
StatusOr<WorkerOptions> worker_options_from_json(const nlohmann::json& m);

}  // namespace tlt::rl
