// The drafter merge of an RL step (step 3 of runtime/rl/run.h's header): the drafters the
// trainers handed back, averaged weighted by their optimizer steps, into the driver's drafter.
// A part is a worker's file, so it is checked first: one that does not load as this drafter's
// checkpoint (model::load_drafter_checkpoint's checks) or holds a weight that is not finite is
// left out (logged, naming the file), and the others are averaged over their own steps; a worker's
// file can neither end the run nor poison the merge.
//
// Returns the number of parts merged (0: the drafter is untouched: no parts, none with steps, or
// none sound). Errors: a sound part that cannot be read again (removed under the driver).
// Thread safety: the caller's thread; `drafter` is written.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "api/status.h"
#include "runtime/model/drafter.h"

namespace tlt::rl {

// (checkpoint, optimizer steps) per trainer.
using DrafterParts = std::vector<std::pair<std::string, int64_t>>;

StatusOr<int64_t> merge_drafter_parts(model::Drafter& drafter, model::Transformer policy,
                                      int64_t n_layers, const DrafterParts& parts,
                                      const std::function<void(const std::string&)>& log);

}  // namespace tlt::rl
