// What `tlt validate` checks beyond the manifest itself: the files and the program a job names,
// on this machine, as far as that is cheap. `tlt run` makes the same checks (without starting the
// reward program) before it loads anything.
//
//   dataset  spec.task.dataset.path and heldOutPath: the first max_rows rows of each are read
//            and checked as the run checks every row (DatasetTask::check_row: promptField a
//            string or chat messages, answerField present, an answer the built-in verifier
//            reads); a file without rows is an error; a held-out prompt that training rows also
//            hold is an error (heldOutPath), a prompt repeated in the training rows a warning
//            (heldOut: its copies may fall on both sides of the split). Only the rows read are
//            compared; a note says when a file has more.
//   model    spec.model.path (or the preset): its config (a GGUF's metadata, a Hugging Face
//            config.json, a tlt checkpoint's model card; no weights are read) gives the context,
//            which must leave a prompt room next to spec.algorithm.maxResponseTokens
//            (api::check_model_context). TSTPretrainJob: the path must resolve, and
//            spec.data.paths must exist.
//   reward   spec.reward.command started once on a made-up request (reward_probe.h), when
//            probe_reward is set.
//
// Paths: a relative path is read from the working directory (as `tlt run` and a pod read it);
// when it is missing there but exists beside the manifest, the error says so. An absolute path
// whose first directory does not exist on this machine (/models, /data on a workstation) is taken
// for a path inside the job's pods: not checked, with a note.
//
// Every finding names its field (api::FieldError). Nothing here writes a file; an http reward is
// never contacted (validate stays offline).
// Thread safety: a function; it may start one child process and reap it before it returns.
#pragma once

#include <cstdint>
#include <string>

#include "api/field.h"
#include "api/manifest.h"

namespace tlt::cli {

// The rows of each dataset file `tlt validate` reads (about 20 ms of JSONL).
inline constexpr uint64_t kCheckRows = 10000;

struct Findings {
  api::FieldErrors errors;    // the job cannot run here as written
  api::FieldErrors warnings;  // it runs, but something is likely wrong or slow
  api::FieldErrors notes;     // what was not checked, and why
  void append(const Findings& other);
};

struct LocalCheckOptions {
  std::string manifest;      // the manifest's path, for hints about relative paths
  bool probe_reward = true;  // start a command reward once (reward_probe.h)
  uint64_t max_rows = kCheckRows;
};

Findings check_local(const api::Job& job, const LocalCheckOptions& options);

// True when `path` is absolute and its first directory does not exist here: a pod's path.
bool pod_path(const std::string& path);

}  // namespace tlt::cli
