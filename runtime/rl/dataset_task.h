// A task of the user's own prompts and answers (spec.task.dataset): rows of a JSONL or Parquet
// dataset (runtime/dataset/dataset.h), scored by a built-in verifier (runtime/reward).
//
//   rows       every row holds promptField (a string, or a list of chat messages {role,
//              content}) and answerField (any JSON value), both dotted paths into nested
//              objects. open() checks all rows before it returns (a built-in verifier also
//              checks each answer), so a bad row fails the job before any training.
//   held out   heldOutPath's rows; else the spec.task.dataset.heldOut rows of smallest
//              hash(row's canonical JSON, spec.task.seed): a row's split does not depend on its
//              place or its file's format. problem(i, true) is held-out row i mod their count.
//   training   position j of the training stream (problem(i, false), j = i mod 2^32 plus one
//              for each 2^40 of i: fitting_problem's redraws land on the next rows) is row
//              perm_e[j mod n] of epoch e = j / n, perm_e a Fisher-Yates shuffle drawn from
//              (seed, e): each epoch visits every training row once, in its own order, and a
//              resumed run (which asks for the same positions) meets the same rows.
//   prompts    a string is one user turn of the model's chat template (Codec::encode_prompt),
//              a message list is rendered as it is (Codec::encode_messages). fit() tokenizes
//              every row once against the prompt budget: longPrompts skip drops a longer row
//              from the split it is in, truncate cuts its prompt (a message list: its last
//              turn's content) from the start until it fits, fail refuses the job naming the row.
//   reward     spec.reward.type's built-in verifier (exact, numeric, math, regex; "" is math:
//              reward::verifier_options, the scorer's dispatch) of the response against the
//              row's answer. command and http rewards are scored outside the task (the scorer);
//              reward() of such a task is 0, and a problem carries the row's spec.reward.fields
//              for their requests (Problem::fields_json: each dotted path under its own name,
//              null where the row lacks it; "*" the whole row under "row").
//
// Memory: the reader's index (16 bytes a row), 16 bytes a row for the split (8 more while it is
// drawn), and one epoch's permutation (4 bytes a training row); rows are read on demand.
// Errors name the spec field (spec.task.dataset.<field>) and the row's file and line.
// Thread safety: after open() and fit(), all methods are const and safe from several threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/spec.h"
#include "api/status.h"
#include "runtime/dataset/dataset.h"
#include "runtime/reward/verifiers.h"
#include "runtime/rl/tasks.h"

namespace tlt::rl {

class DatasetTask : public Task {
 public:
  // Opens spec.path (and spec.held_out_path) and checks every row. InvalidArgument naming the
  // field: a missing or malformed prompt or answer field, an empty dataset (path), heldOut not
  // below the rows (heldOut), the readers' errors (file and line), a bad reward spec.
  // `log`, when given, hears how far the read has come (a line every few seconds of a large
  // dataset's read).
  static StatusOr<std::unique_ptr<DatasetTask>> open(
      const api::DatasetSpec& spec, const api::RewardSpec& reward, uint64_t seed,
      const std::function<void(const std::string&)>& log = nullptr);
  // The checks open() makes of each row before anything trains: promptField holds a string or a
  // list of chat messages, answerField is present, and a built-in `verifier` (null for command
  // and http rewards) reads the answer. InvalidArgument naming the field. (`tlt validate` checks
  // a dataset's first rows with it.)
  static Status check_row(const api::DatasetSpec& spec, const reward::VerifierOptions* verifier,
                          const nlohmann::json& row);

  // Tokenizes every row's prompt with `codec` against `max_prompt` tokens, on every core, and
  // applies longPrompts. FailedPrecondition naming spec.task.dataset.longPrompts and the row
  // (fail, or a split left empty by skip); the codec's errors (the first row's in order). `log`
  // hears how far it has come every few seconds. Call once, before problem().
  Status fit(const Codec& codec, int64_t max_prompt,
             const std::function<void(const std::string&)>& log = nullptr);

  Problem problem(uint64_t i, bool held_out) const override;
  double reward(const Problem& p, const std::string& response) const override;
  std::string chat_prompt(const Problem& p) const override { return p.prompt; }
  StatusOr<std::vector<int64_t>> encode(const Codec& codec, const Problem& p) const override;

  int64_t train_rows() const { return int64_t(train_.size()); }
  int64_t held_out_rows() const { return int64_t(held_.size()); }
  int64_t held_out_count() const override { return held_out_rows(); }
  int64_t skipped() const { return skipped_; }      // rows fit() dropped (longPrompts: skip)
  int64_t truncated() const { return truncated_; }  // rows fit() cut (longPrompts: truncate)
  // A hash of every row's content, the split and the fields: the task's identity in cache keys.
  uint64_t fingerprint() const { return fingerprint_; }
  // The training row (an index of train's dataset) at stream position j (see the top).
  uint64_t train_row(uint64_t j) const;

 private:
  struct Source {  // a dataset and where its rows go
    std::unique_ptr<dataset::Dataset> data;
    bool held_out = false;
  };
  struct RowRef {
    uint32_t source;  // 0: spec.path, 1: heldOutPath
    uint64_t row;
  };
  DatasetTask() = default;
  Status split(const std::vector<uint64_t>& hashes);
  // The row's problem (prompt cut by `drop` leading characters); a row that can no longer be
  // read gives an empty problem (reward 0).
  Problem row_problem(const RowRef& r, size_t drop) const;
  StatusOr<std::vector<int64_t>> fit_row(const Codec& codec, int64_t max_prompt, RowRef r,
                                         bool* keep);
  uint64_t key(const RowRef& r) const { return (uint64_t(r.source) << 63) | r.row; }

  api::DatasetSpec spec_;
  api::RewardSpec reward_spec_;
  reward::VerifierOptions verifier_;
  bool builtin_ = true;  // the reward is a built-in verifier
  uint64_t seed_ = 0;
  std::vector<Source> sources_;
  std::vector<RowRef> train_, held_;
  std::unordered_map<uint64_t, size_t> drop_;  // key(row) -> leading characters cut (truncate)
  int64_t skipped_ = 0, truncated_ = 0;
  uint64_t fingerprint_ = 0;
  mutable std::mutex mu_;
  mutable uint64_t perm_epoch_ = UINT64_MAX;  // guarded by mu_
  mutable std::vector<uint32_t> perm_;        // guarded by mu_: that epoch's order of train_
};

// A row's spec.reward.fields (`names`: dotted paths, "*" for the whole row under "row"; a path the
// row lacks is null) as a JSON object's text, "" when `names` is empty: what a reward request
// carries for the row, in a run and in `tlt score`/`tlt validate`.
std::string reward_fields_json(const std::vector<std::string>& names, const nlohmann::json& row);

}  // namespace tlt::rl
