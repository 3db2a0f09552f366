// An RL run's scored responses on record: samples.jsonl in the job's report directory
// (runtime/report/job_report.h), one JSON object per line, one line per recorded response:
//
//   {"step": 3, "phase": "train", "id": "s3-17", "problem": "train.jsonl:41",
//    "prompt": "<|im_start|>user\n...", "response": "...", "answer": "42",
//    "fields": {"data_source": ...}, "reward": 0.25, "tokens": 64, "promptTokens": 88,
//    "finish": "eos"}
//
//   step      the RL step (1-based) of a "train" row; for a "heldout" row the step after which
//             the policy was evaluated (0: the model the run starts from)
//   phase     "train" (a step's rollout) or "heldout" (a held-out evaluation)
//   id        the request's id, as the reward program received it (runtime/rl/scoring.h)
//   problem   the dataset row (Problem::id: file and row), absent for a generated problem
//   prompt    the prompt as the policy read it (Codec::render: the chat template's markers kept)
//   response  the response as the reward received it (Codec::decode)
//   answer    the reference handed to the reward (ScoreRequest::reference_json, as JSON)
//   fields    the row's spec.reward.fields sent with the request, when there are any
//   reward    the reward the run used
//   tokens, promptTokens   lengths in the policy's tokens (the response's end token counted)
//   finish    eos (the response ended on one of the codec's end ids), length (it reached
//             spec.algorithm.maxResponseTokens) or context (cut by the model's context)
//
// Which responses: one in spec.report.samples (1: all, 0: none), counted over the run's
// responses in order (step s's response i is number (s - 1) x B + i of a run of B responses a
// step; a held-out evaluation's are counted from 0), so the choice rotates over the groups and is
// the same after --resume. Rows are appended and flushed as each batch is scored, so a run that
// fails or is killed keeps every row of the steps it scored. A run that starts afresh empties
// the file; a resumed one keeps the rows up to its checkpoint's step (and drops later ones, which
// it scores again).
//
// Failures are warnings (the `on_warning` callback, once): samples.jsonl, like the rest of
// the report, never fails the run that writes it.
// Thread safety: a SampleLog is used from one thread (the driver's); the functions are pure.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"

namespace tlt::rl {

inline constexpr const char* kSamplesFile = "samples.jsonl";

struct SampleRow {
  int64_t step = 0;
  std::string phase;  // "train" | "heldout"
  std::string id;
  std::string problem;  // "" for a generated problem
  std::string prompt, response;
  nlohmann::json answer;
  nlohmann::json fields;  // null when the request carried none
  double reward = 0;
  int64_t tokens = 0, prompt_tokens = 0;
  std::string finish;  // "eos" | "length" | "context"
};

// The row's line, its keys in the order above.
nlohmann::ordered_json to_json(const SampleRow& r);
// A row of samples.jsonl; InvalidArgument naming `where` and the field that is missing or
// mistyped.
StatusOr<SampleRow> sample_from_json(const nlohmann::json& j, const std::string& where);
// Every row of a samples.jsonl file, in order; NotFound / InvalidArgument naming the file and
// line.
StatusOr<std::vector<SampleRow>> read_samples(const std::string& path);

// How response `response` (token ids, its end token included when it hit one) ended.
std::string finish_reason(const std::vector<int64_t>& response, const Codec& codec,
                          int64_t max_response_tokens);

class SampleLog {
 public:
  // Records nothing.
  SampleLog() = default;
  // Rows go to `path` (its directory created); one response in `every` (0: none, and the file is
  // left alone). Texts through `codec` (borrowed, outlives the log). `kept_through_step` < 0
  // empties the file; otherwise rows of later steps are dropped (a resumed run's).
  SampleLog(std::string path, int64_t every, const Codec* codec, int64_t max_response_tokens,
            int64_t kept_through_step, std::function<void(const std::string&)> on_warning);

  // One scored batch: response j answers problems[j / K] (K = responses / problems), read
  // prompts[j], was sent as request_id(j) and scored rewards[j]. prompts, responses, rewards:
  // (problems x K,). `phase`: "train" or "heldout". The rows chosen are appended and flushed.
  void record(int64_t step, const std::string& phase, const std::vector<Problem>& problems,
              const std::vector<std::vector<int64_t>>& prompts,
              const std::vector<std::vector<int64_t>>& responses,
              const std::vector<double>& rewards,
              const std::function<std::string(int64_t j)>& request_id);

  const std::string& path() const { return path_; }

 private:
  // The row of response j (to `p`); false after a warning when its text cannot be decoded.
  bool row(int64_t step, const std::string& phase, const Problem& p,
           const std::vector<int64_t>& prompt, const std::vector<int64_t>& response, double reward,
           const std::string& id, SampleRow* out);
  void warn(const std::string& what);

  std::string path_;
  int64_t every_ = 0;
  const Codec* codec_ = nullptr;
  int64_t max_response_tokens_ = 0;
  std::function<void(const std::string&)> warn_;
  std::ofstream out_;
  bool failed_ = false;  // a write failed and was said: nothing more is recorded
};

}  // namespace tlt::rl
