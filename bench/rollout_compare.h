// bench/rollout's decode ratios: plain decoding against the adaptive engine and each arm alone on
// the same requests, per batch size, with accept lengths, phases and whether the outputs are plain
// decoding's. Shared by the preset runs (rollout_preset.h) and the --model runs (rollout_model.h).
// The speculation ceiling is rollout_ceiling.h.
//
// Thread safety: one thread; every setting travels in the Table it is given.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "api/status.h"
#include "runtime/model/drafter.h"
#include "runtime/model/transformer.h"
#include "runtime/rollout/engine.h"

namespace tlt::bench {

// How every measured engine decodes: main's flags (rollout::EngineOptions has each one's
// meaning).
struct DecodeSettings {
  bool show_bandit = false;  // print the bandit's value of each arm per context
  std::string selector_value = "throughput";
  std::string exploration = "uniform";
  int catch_up_limit = 8;
  double draft_confidence = 0.0;
  double epsilon = 0.1;
  bool plain_floor = true;
  bool reproducible = true;     // sampled chains as RLJob rollouts draw them
  bool coupled_drafts = true;   // sampled drafts at the target's race keys
  double coupling_noise = 1.0;  // coupled trees' scoring
  bool bfloat16 = false;        // --dtype resolved: decoding's products in bfloat16
  int64_t max_seq = 512;        // positions per request of the measured engines
};

// What one side-by-side table measures (main's flags).
struct Table {
  std::vector<int> batches, fixed;  // batch sizes; those where each arm also runs alone
  std::vector<std::string> arms;
  std::string arms_s;
  int threads = 1, max_new = 192, shortcut = 3, warmup_batches = 1, waves = 3, repeats = 2;
  int group = 1;
  double temperature = 0.0;
  DecodeSettings decode;  // how every engine of the table decodes
};

// n requests from the `offset`-th prompt on (a GRPO group of `group` requests shares one), or the
// error that kept them from being made.
using RequestMaker = std::function<StatusOr<std::vector<rollout::Request>>(int n, int offset)>;

// A drafter the table measures, by its feature mode (spec.drafter.features).
struct NamedDrafter {
  std::string name;  // "last" or "fused"
  model::Drafter drafter;
};

// One row of the side-by-side summary: an arm (or "adaptive") of one drafter at one batch size
// and temperature, against plain decoding of the same requests.
struct SummaryRow {
  std::string drafter, arm;
  int batch = 0;
  double temperature = 0, accept = 0, ratio = 0;
};

// For each batch size of `t`: plain vs adaptive tokens/s on the same requests (the faster of
// t.repeats alternating runs each), the accepted length, arm use and phases; at t.fixed batch
// sizes each arm alone too, each drafter of `drafters` against the same plain runs. Appends every
// measured row to `summary`. Returns the runs whose outputs should have been plain decoding's
// (greedy, or sampled reproducibly) and are not: 0 unless speculation lost tokens; or the engine's
// error (InvalidArgument for an arm it cannot run) or `make`'s.
StatusOr<int> compare(model::Transformer target, const std::vector<NamedDrafter>& drafters,
                      const Table& t, const RequestMaker& make, std::vector<SummaryRow>* summary);

// With bfloat16 decoding asked for (t.decode.bfloat16): the probe's answer on the target's device
// and why (model::bfloat16_decode_precision; the engines find it cached). Nothing otherwise.
void print_precision(model::Transformer target, const Table& t);

// The summary of every table: per drafter, batch size and arm, the accept length and the ratio
// to plain decoding at each temperature, side by side.
void print_summary(const std::vector<SummaryRow>& rows, const std::vector<double>& temperatures);

}  // namespace tlt::bench
