// `tlt run` for a TSTPretrainJob: corpus, tokenizer, pretraining with progress, held-out
// evaluations, checkpoints, and a report (with --compare, the next-token baseline too).
#pragma once

#include <iosfwd>
#include <string>

#include "api/spec.h"

namespace tlt::cli {

struct TSTRunFlags {
  bool compare = false;    // also run the baseline with the same seed, data and FLOPs
  bool baseline = false;   // run only the baseline
  bool resume = false;     // continue from the job's checkpoint directory
  std::string report_dir;  // default: <checkpoint.path or .tlt/NAME>/report
};

// Returns the process exit code (0 ok, 1 bad input or failure).
int run_tst_job(const api::TSTPretrainJob& job, const TSTRunFlags& flags, std::ostream& out,
                std::ostream& err);

}  // namespace tlt::cli
