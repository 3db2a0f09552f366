// One asynchronous interface for every reward source of an RL job (spec.reward).
//
// A batch is a step's responses (or a held-out evaluation's): begin(n) opens n slots, submit()
// hands one finished response to its source as soon as it exists (the driver submits while the
// rollout's tail still generates), wait() blocks until every slot has its reward. The rewards
// depend only on the requests, never on when or in which order they were submitted, so scoring
// overlapped with the rollout gives exactly the rewards of scoring after it.
//
// Sources (make_scorer):
//   task      type "" on a generated task (arithmetic-cot, countdown): ScorerOptions::task_reward,
//             run in submit().
//   verifier  exact | numeric | math | regex (runtime/reward/verifiers.h), and type "" on a
//             dataset (math): verifier_options, the one dispatch of spec.reward.type that a
//             dataset task shares; run in submit(). The reference of a generated problem is its
//             answer as a JSON string.
//   command   the user's program, started once (posix_spawnp, no shell) when the scorer is made,
//             in the job's environment plus PYTHONUNBUFFERED=1 (unless the job sets it); JSON
//             lines: one request {"id", "prompt", "response", "answer"} (plus the row's
//             spec.reward.fields: ScoreRequest::fields_json) per line on its stdin, one
//             {"id", "reward"} per line on its stdout, in any order, matched by id. Its stderr is
//             the job's; a stdout line that is not an answer (not JSON, or JSON without "id": a
//             banner, a debug print) is logged on stderr as the program's output, with one
//             warning, and skipped. Text that is not UTF-8 reaches it with U+FFFD in place of each
//             invalid byte. A reader/writer thread owns the pipes.
//   command through FIFOs: with ScorerOptions::pipe_dir (the environment variable
//             TLT_REWARD_PIPE_DIR) the program is not started here: it already runs (a sidecar
//             container on a cluster) and reads requests from the FIFO <pipe_dir>/requests and
//             writes rewards to <pipe_dir>/rewards, which the scorer creates (mkfifo) when they
//             do not exist. The wire format is the same. A "restart" here closes and reopens
//             both FIFOs (the sidecar's program must reopen them when it sees end of file);
//             the sidecar process itself is restarted by its container runtime, not by tlt.
//             A sidecar program restarted quickly may reopen the FIFOs before tlt sees the
//             old one's end; what the old one had read is then lost with it, and only
//             spec.reward.timeout notices (a restart and a resend, as for a hang).
//   http      each request's JSON POSTed to spec.reward.url (cpprestsdk), at most
//             spec.reward.concurrency in flight; the answer's body is {"reward": <reward>}, the
//             reward read as a command's is (check_reward below; its "id", when present, must be
//             the request's).
//
// Failures and the retry policy (command, FIFO, http). A reward (check_reward) is a JSON number,
// finite, within [-1e6, 1e6], or true (1) or false (0), or verl's {"score": <number or bool>, ...};
// anything else for a known id (NaN, Infinity, a string, null, a missing "reward", an
// out-of-range number) fails the batch at once, since asking again would repeat it. A program
// that cannot be started (spec.reward.command missing or not executable) fails make_scorer. A
// program that exits, closes its pipes, answers with an "id" that is not a string or not a
// known, unanswered id, or owes a reward and sends none for spec.reward.timeout (before its
// first reward since it started: max(timeout, spec.reward.startupTimeout); a hang, an omitted
// id, an unflushed answer) is restarted (SIGKILL, spawned again) and sent every request still
// unanswered, at most spec.reward.retries times per batch; then every unanswered slot fails with
// the last reason, which says what usually causes it. An http request that times out, is refused or
// answers 5xx is sent again, at most spec.reward.retries times; a 4xx, a body that is not JSON
// or has no valid reward fails at once. A failed batch fails the RL step: the job keeps its last
// checkpoint. Never a hang: every wait is bounded by max(timeout, startupTimeout) *
// (retries + 1) per request plus the restarts.
//
// Errors are Status (never exceptions) naming spec.reward.<field>: type, command, fields,
// timeout, startupTimeout, retries, url; a verifier's InvalidArgument naming `answer`.
//
// A command or FIFO source whose retries ran out stays failed: every later request fails with
// the same error (the step fails; a resumed job starts the program again).
//
// Thread safety: begin(), submit() and wait() from one thread (the driver's); the sources' own
// threads complete slots. The destructor stops the program (stdin closed, then SIGKILL) and
// joins its threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/spec.h"
#include "api/status.h"

namespace tlt::reward {

// The smallest and largest reward a command or http source may return.
constexpr double kMaxAbsReward = 1e6;

struct ScoreRequest {
  std::string id;              // unique within a batch; the wire's "id"
  std::string prompt;          // the problem's prompt text (not its chat rendering)
  std::string response;        // the decoded response
  std::string reference_json;  // the answer as JSON text: a dataset row's answerField value
  // More of the row for a command or http source (spec.reward.fields): a JSON object's text whose
  // keys join the wire's, e.g. {"data_source": "gsm8k", "extra_info": {...}}; "" adds none.
  std::string fields_json = {};
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // Opens a batch of n slots. The previous batch is forgotten (wait() for it first).
  void begin(size_t n);
  // Scores `request` as slot `slot` (< n). A slot already submitted keeps its first request.
  void submit(size_t slot, ScoreRequest request);
  bool submitted(size_t slot) const;
  // Blocks until every slot has a reward: the rewards by slot, or the batch's first error.
  // FailedPrecondition when a slot was never submitted.
  StatusOr<std::vector<double>> wait();
  // Slots of the open batch scored so far (for the overlap's accounting).
  size_t scored() const;

 protected:
  // Starts scoring; the source calls finish(slot, ...) exactly once, from any thread, before or
  // after start returns.
  virtual void start(size_t slot, ScoreRequest request) = 0;
  // Called by begin(): a source's per-batch state (its retry budget) starts afresh.
  virtual void on_begin() {}
  void finish(size_t slot, StatusOr<double> reward);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<double>> rewards_;
  std::vector<bool> submitted_;
  size_t done_ = 0;
  Status error_;
};

struct ScorerOptions {
  api::RewardSpec spec;
  bool dataset = false;  // type "" scores with math (a dataset) rather than task_reward
  // type "" on a generated task: the task's own reward of a request (required then).
  std::function<double(const ScoreRequest&)> task_reward;
  // command: talk to an already running program through FIFOs in this directory (see the top).
  std::string pipe_dir;
};

// The scorer of `options.spec.type`. InvalidArgument naming spec.reward.<field> for a bad
// option (spec.reward.fields: on a generated task, for a built-in verifier, or naming one of the
// request's own keys id, prompt, response, answer, row); Unavailable naming spec.reward.command
// when the program cannot be started (or the FIFOs cannot be made or opened within
// spec.reward.timeout).
StatusOr<std::unique_ptr<Scorer>> make_scorer(const ScorerOptions& options);

// One reward value of a command or http answer (a number, a bool, or {"score": ...}) as a
// number; InvalidArgument naming `field` and `id` otherwise (exposed for the tests).
StatusOr<double> check_reward(const nlohmann::json& value, const std::string& field,
                              const std::string& id);

}  // namespace tlt::reward
