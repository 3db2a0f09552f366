// `tlt run` for a TSTPretrainJob: corpus, tokenizer, pretraining with progress, held-out
// evaluations, checkpoints, and a report (with --compare, the next-token baseline too).
//
// Data parallel (spec.workers.replicas = R > 1): R ranks, each training on its shard of every
// global batch (runtime/tst/trainer.h). On one machine `tlt run` is rank 0 and starts ranks
// 1..R-1 as worker processes of this binary (`tlt run-role` with TLT_* env, stdout in
// <checkpoint dir>/workers/worker-<r>.log); they meet at a TCPStore on 127.0.0.1 that rank 0
// hosts, each rank with max(1, cores / R) compute threads. In a cluster each worker pod is one
// rank (run_tst_role). Only rank 0 prints progress and writes checkpoints, reports and metrics.
// A worker that dies fails the run (its peers' collectives fail at once; a stalled one after
// the collective timeout, 300 s) and rank 0 names it.
#pragma once

#include <iosfwd>
#include <string>

#include "api/spec.h"
#include "api/status.h"

namespace tlt::cli {

struct TSTRunFlags {
  bool compare = false;    // also run the baseline with the same seed, data and FLOPs
  bool baseline = false;   // run only the baseline
  bool resume = false;     // continue from the job's checkpoint directory
  std::string report_dir;  // default: <checkpoint.path or .tlt/NAME>/report
  // Data parallel. Rank 0 with no rendezvous_host: the local run, which starts the other ranks.
  // Otherwise this process is rank `rank` of a group whose rank 0 hosts the rendezvous at
  // rendezvous_host:rendezvous_port (rank 0 listens there on every interface).
  int rank = 0;
  std::string rendezvous_host;
  int rendezvous_port = 29500;
};

// The tokenizer of a TSTPretrainJob's data: spec.data.tokenizer.path when given (a path ending in
// .json is a Hugging Face tokenizer.json, anything else a sentencepiece model); else the model's
// own when spec.model.path names one with a tokenizer (model_source.h; a GGUF without one is
// InvalidArgument); else none (path "": a BPE of spec.data.tokenizer.vocabSize is trained on the
// corpus and cached). Errors of
// resolve_model_source and model_tokenizer_source, prefixed with spec.model.path.
struct DataTokenizer {
  std::string path;
  bool hf = false;  // a model's own tokenizer (tokenizer.json, HF directory or GGUF)
};
StatusOr<DataTokenizer> data_tokenizer(const api::TSTPretrainJobSpec& spec);

// The path of spec.data's tokenized corpus in the cache, made first (by the tlt-data binary
// beside this one, with a progress line on `out`) when missing. Unavailable when that fails.
StatusOr<std::string> tokenized_corpus_file(const api::TSTPretrainJobSpec& spec, std::ostream& out);

// Returns the process exit code (0 ok, 1 bad input or failure).
int run_tst_job(const api::TSTPretrainJob& job, const TSTRunFlags& flags, std::ostream& out,
                std::ostream& err);

// `tlt run-role` of a TSTPretrainJob pod: rank `index` (TLT_INDEX) of spec.workers.replicas.
// Rank 0 hosts the rendezvous on `port` (TLT_RENDEZVOUS_PORT); the others reach it at
// TLT_RENDEZVOUS_ADDRESS, by default <job>-worker-0.<TLT_SERVICE> (the headless Service), and
// wait up to 10 minutes for it. Also read (set by a local `tlt run` for its worker processes):
// TLT_TST_RUNS ("tst", "baseline" or "tst,baseline"), TLT_RESUME=1, TLT_THREADS (compute
// threads). Returns the process exit code; 1 for an index outside the replicas.
int run_tst_role(const api::TSTPretrainJob& job, int index, int port, std::ostream& out,
                 std::ostream& err);

}  // namespace tlt::cli
