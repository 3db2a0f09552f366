// `tlt validate`'s trial of a `type: command` reward: the program is started once, as the job
// would start it, and sent one made-up request (the dataset's first row, or the generated task's
// first problem, with that problem's answer as the response), on the wire of
// runtime/reward/scorer.h.
//
// What it reports, each on spec.reward.command:
//   errors    the program cannot be started; it exits, or sends no reward within the start-up
//             allowance (max of spec.reward.timeout and startupTimeout), before answering; it
//             answers another id, or a reward the scorer refuses (check_reward); it holds its
//             answer in an output buffer until its input ends even with PYTHONUNBUFFERED=1 (a job
//             would wait spec.reward.timeout for each reward and restart it).
//   warnings  what the job's runner forgives: lines on stdout that are not answers (a banner,
//             debug prints: the job logs them); an answer held in a buffer that only
//             PYTHONUNBUFFERED=1, which the runner sets, releases.
//   notes     how long the first answer took, and the reward.
// A program that holds its answer is found waiting for more input: a process of its group in
// read() on its stdin, with no CPU used for a second, while it owes the answer; its input is then
// closed, and an answer that follows at once was buffered. A program waiting on anything else (a
// network, a sleep) is given the whole allowance. Its stderr is kept (the last lines appear in an
// error), never printed.
//
// Thread safety: a function; the program (a process group of its own) is killed and reaped before
// it returns.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/spec.h"
#include "api/status.h"
#include "runtime/cli/local_checks.h"
#include "runtime/reward/scorer.h"

namespace tlt::cli {

Findings probe_reward(const api::RLJob& job);

// The request of one dataset-like row (`tlt score`'s rows, a dataset's first row): its "prompt"
// (else the job's promptField; a string, or chat messages whose contents are joined by newlines
// as a run's requests carry them), its "answer" (else the job's answerField; any JSON value) and
// the job's spec.reward.fields from it. InvalidArgument naming what the row lacks.
StatusOr<reward::ScoreRequest> row_request(const api::RLJob& job, const nlohmann::json& row,
                                           std::string id, std::string response);

}  // namespace tlt::cli
