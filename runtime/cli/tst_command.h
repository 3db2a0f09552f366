// `tlt run` for a TSTPretrainJob: pretraining with progress, held-out evaluations, checkpoints,
// /metrics and a report (with --compare, the next-token baseline too). The job's set-up (its
// corpus, the plan of each run, the data-parallel group and local worker processes) is
// runtime/tst/job_setup.h; this command turns flags into its options and presents the runs.
//
// Data parallel (spec.workers.replicas = R > 1): on one machine `tlt run` is rank 0 and starts
// ranks 1..R-1 as `tlt run-role` worker processes (runtime/tst/local_workers.h); in a cluster
// each worker pod is one rank (run_tst_role). Only rank 0 prints progress and writes
// checkpoints, reports and metrics. A worker that dies fails the run (its peers' collectives
// fail at once; a stalled one after the collective timeout, 300 s) and rank 0 names it.
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
  // Data parallel. Rank 0 with no rendezvous_host: the local run, which starts the other ranks.
  // Otherwise this process is rank `rank` of a group whose rank 0 hosts the rendezvous at
  // rendezvous_host:rendezvous_port (rank 0 listens there on every interface), or, for a local
  // run's workers, at the file store rendezvous_file (TLT_RENDEZVOUS_FILE; no port at all).
  int rank = 0;
  std::string rendezvous_host;
  int rendezvous_port = 29500;
  std::string rendezvous_file;
};

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
