// Setting up one rank of a TSTPretrainJob before its first step: its documents (job_corpus.h),
// its data-parallel group when spec.workers.replicas = R > 1 (group.h), the worker processes of
// the other ranks when it is a local run's rank 0 (local_workers.h), and the plan of each of its
// runs (run.h). What a rank then does with them (progress, report, metrics) is the caller's.
//
// Data parallel: each rank trains on its shard of every global batch (runtime/tst/trainer.h).
// A local run is rank 0 with no rendezvous host: it hosts a TCPStore on a free port of
// 127.0.0.1, starts ranks 1..R-1 as worker processes with max(1, cores / R) compute threads
// each (and takes that many itself), writing the job to <job_base_dir>/workers/job.json and
// their stdout to <job_base_dir>/workers/worker-<r>.log. In a cluster each worker pod is one
// rank: rank 0 listens on rendezvous_port on every interface, the others connect to
// rendezvous_host (waiting up to 10 minutes; 2 on loopback). A collective that waits on a peer
// longer than $TLT_COLLECTIVE_TIMEOUT_S seconds (default 300) fails the run.
//
// Thread safety: one thread uses a JobRank.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include "api/spec.h"
#include "api/status.h"
#include "runtime/tst/group.h"
#include "runtime/tst/job_corpus.h"
#include "runtime/tst/local_workers.h"
#include "runtime/tst/run.h"

namespace tlt::tst {

// Where a job keeps its files: spec.checkpoint.path, or .tlt/NAME when that is empty.
std::string job_base_dir(const api::TSTPretrainJob& job);

// The plan of one run of the job: `label` ("tst" or "baseline") names its checkpoint
// directory under spec.checkpoint.path (none when that is empty); superposition is on when
// both `superposition` and spec.superposition.enabled are; vocab is the data's
// (JobDocuments::vocab). A Hugging Face data tokenizer (data_tokenizer) is recorded as the
// plan's tokenizer_source.
RunPlan run_plan(const api::TSTPretrainJobSpec& spec, int vocab, const std::string& label,
                 bool superposition, bool resume);

// Which rank this process is. Rank 0 with an empty rendezvous_host: the local run, which
// starts the other ranks itself and tells them `runs` and `resume`.
struct RankOptions {
  int rank = 0;
  std::string rendezvous_host;
  int rendezvous_port = 29500;
  // Ranks of a local run meet at this c10d file store (rank 0 makes it in a 0700 directory of
  // the job's; the workers get it as TLT_RENDEZVOUS_FILE), so no store listens on a port.
  std::string rendezvous_file;
  std::string runs = "tst";  // the local workers' TLT_TST_RUNS (local_workers.h)
  bool resume = false;
  // This rank's device, "cpu" or "cuda:K" (runtime/device/device.h): on CUDA the group is NCCL's
  // and the device is made current before it is built; on the CPU, Gloo's.
  std::string device = "cpu";
};

class JobRank {
 public:
  // Reads the job's documents (tokenizing the corpus first when it is not cached, with progress
  // on `log`), then with R > 1 opens and joins the group, starting the local workers first when
  // this is a local run. Errors of job_documents; of opening or joining the group, as
  // "data-parallel rank r of R: <why>" followed by a line per local worker that failed; of
  // starting the local workers.
  static StatusOr<std::unique_ptr<JobRank>> set_up(const api::TSTPretrainJob& job,
                                                   const RankOptions& options, std::ostream& log);
  ~JobRank();
  JobRank(const JobRank&) = delete;
  JobRank& operator=(const JobRank&) = delete;

  const JobDocuments& documents() const { return docs_; }
  // The group's collectives (borrowed, valid until finish()); null with one replica.
  Collective* collective() const;

  // Leaves the group (a peer's pending collective then fails at once rather than at its
  // timeout) and waits up to timeout_s for the local workers: "" when every one exited 0 (or
  // there are none), else one line per worker that failed or did not finish (those are ended).
  std::string finish(int timeout_s);

 private:
  JobRank() = default;

  JobDocuments docs_;
  LocalWorkers workers_;                      // ranks 1..R-1 of a local run; else none
  std::unique_ptr<DataParallelGroup> group_;  // null with one replica or after finish()
};

}  // namespace tlt::tst
