// bench/rollout's drafters, warm-started as an RLJob on a model file (spec.model.path) warm-starts
// its drafter: rl::load_or_train_drafter_on_generations, on the target's own sampled answers to
// the task's training problems, cached under data::cache_root()/drafter. The --model runs pass
// arithmetic-cot through the model's chat template; the preset runs pass the corpus's windows
// (rollout_preset.h). So every table measures a drafter that a job trains.
//
// Thread safety: one thread (LibTorch's intra-op threads as the process configured them).
#pragma once

#include <string>
#include <vector>

#include "api/status.h"
#include "bench/rollout_compare.h"
#include "bench/rollout_options.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"

namespace tlt::bench {

// What the drafters learn from and how their cache is keyed.
struct DrafterSource {
  const rl::Task* task = nullptr;    // borrowed: its training problems are the warm start's prompts
  const rl::Codec* codec = nullptr;  // borrowed: how those prompts become ids, and the end ids
  std::string model_key;             // the target's weights (model::model_identity of its file)
  std::string task_key;              // the task's identity in the cache key
  std::string generations;           // whose generations, for the log: "the model's"
};

// A drafter per o.drafter.features on `target` (o.drafter.layers each), each warm-started with
// o.drafter's steps, prompts, levels, vocabulary and temperature and t's response length, context
// and precision, or loaded from the cache; prints what it did. With o.prepare_only, each one's
// greedy agreement on held-out problems too. The first error of the warm starts.
StatusOr<std::vector<NamedDrafter>> warm_start_drafters(const RolloutOptions& o,
                                                        model::Transformer target,
                                                        const DrafterSource& source,
                                                        const Table& t);

}  // namespace tlt::bench
