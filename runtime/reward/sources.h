// The asynchronous reward sources behind make_scorer (runtime/reward/scorer.h): the user's
// program on JSON lines (a child process, or FIFOs to one already running) and an HTTP endpoint.
// Their contracts, failures and retry policy are scorer.h's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/spec.h"
#include "api/status.h"
#include "runtime/reward/scorer.h"

namespace tlt::reward {

// spec.command started as a child process; Unavailable naming spec.reward.command when it
// cannot be.
StatusOr<std::unique_ptr<Scorer>> make_command_scorer(const api::RewardSpec& spec);
// The program behind the FIFOs <pipe_dir>/requests and <pipe_dir>/rewards (made here when
// missing); Unavailable when they cannot be made, or the requests FIFO has no reader within
// spec.timeout.
StatusOr<std::unique_ptr<Scorer>> make_fifo_scorer(const api::RewardSpec& spec,
                                                   const std::string& pipe_dir);
// POSTs to spec.url.
StatusOr<std::unique_ptr<Scorer>> make_http_scorer(const api::RewardSpec& spec);

// A command program's environment: this process's, plus PYTHONUNBUFFERED=1 when `unbuffered` and
// the environment does not set it (so that Python's print() reaches tlt at once, not when its
// buffer fills); *had_it (when given) says whether the environment set it.
std::vector<std::string> program_environment(bool unbuffered = true, bool* had_it = nullptr);

// One request as the wire's JSON object {"id", "prompt", "response", "answer"} plus the keys of
// request.fields_json (never replacing those four); InvalidArgument naming `answer` (or
// spec.reward.fields) when the reference (the fields) is not JSON or nests deeper than
// api::kMaxJsonDepth.
StatusOr<nlohmann::json> request_json(const ScoreRequest& request);

}  // namespace tlt::reward
