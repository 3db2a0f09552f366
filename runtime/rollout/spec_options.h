// The engine options a job spec asks for: spec.speculative (api::SpeculativeSpec) into
// rollout::EngineOptions, field by field, in one place (a rollout worker's engine, the benches).
//
// Only the spec's fields are set; the rest (the engine's size, seed, precision, reproducibility)
// keep EngineOptions' defaults for the caller to set.
// Compiled into tlt_rl (it reads api/spec.h, which tlt_core does not link).
// Thread safety: a pure function.
#pragma once

#include "api/spec.h"
#include "runtime/rollout/engine.h"

namespace tlt::rollout {

EngineOptions engine_options(const api::SpeculativeSpec& s);

}  // namespace tlt::rollout
