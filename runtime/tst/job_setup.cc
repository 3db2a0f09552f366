#include "runtime/tst/job_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>

#include "api/encode.h"
#include "runtime/device/device.h"
#include "runtime/torch_env.h"

namespace tlt::tst {
namespace {
namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// Compute threads of each rank when `world` ranks share this machine.
int threads_per_rank(int world) {
  runtime::ComputeInfo info = runtime::compute_info();
  return std::max(1, std::min(info.intra_op_threads, info.cores / world));
}

// Starts ranks 1..world-1 of `job` as worker processes meeting at `rendezvous_file`, after giving
// this process its share of the cores.
Status start_local_workers(const api::TSTPretrainJob& job, const RankOptions& options, int world,
                           const std::string& rendezvous_file, LocalWorkers& workers) {
  int threads = threads_per_rank(world);
  runtime::configure_threads(threads);
  fs::path dir = fs::path(job_base_dir(job)) / "workers", job_file = dir / "job.json";
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::ofstream(job_file) << api::to_json(job).dump(2) << "\n";
  return workers.start(job_file.string(), dir.string(), world, rendezvous_file,
                       LocalWorkerEnv{options.runs, options.resume, threads});
}

// A fresh file for a local run's group store in <job dir>/workers/rendezvous, a directory only
// this user may enter (made 0700, and refused when it is another user's or looser).
StatusOr<std::string> local_rendezvous_file(const api::TSTPretrainJob& job) {
  fs::path dir = fs::path(job_base_dir(job)) / "workers" / "rendezvous";
  std::error_code ec;
  fs::create_directories(dir, ec);
  struct stat st {};
  if (ec || ::chmod(dir.c_str(), 0700) != 0 || ::lstat(dir.c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    return Status::FailedPrecondition(
        "the data-parallel rendezvous directory " + dir.string() +
        " cannot be made private to this user (0700); check spec.checkpoint.path's permissions");
  }
  std::random_device rd;
  char name[40];
  std::snprintf(name, sizeof name, "group-%08x%08x", unsigned(rd()), unsigned(rd()));
  return (dir / name).string();
}

// Opens and joins the data-parallel group of this rank; the local run (rank 0 without a
// rendezvous host) first starts the other ranks.
StatusOr<std::unique_ptr<DataParallelGroup>> join_group(const api::TSTPretrainJob& job,
                                                        const RankOptions& options,
                                                        LocalWorkers& workers) {
  GroupOptions o;
  o.rank = options.rank, o.world = job.spec.workers.replicas;
  bool local = options.rendezvous_host.empty();
  o.host = local ? "127.0.0.1" : options.rendezvous_host;
  o.port = local ? 0 : options.rendezvous_port;
  o.loopback = o.host == "127.0.0.1" || o.host == "localhost";
  o.rendezvous_timeout_s = local || o.loopback ? 120 : 600;
  int timeout_s = std::atoi(env_or("TLT_COLLECTIVE_TIMEOUT_S", "300").c_str());
  o.timeout_s = timeout_s > 0 ? timeout_s : 300;
  o.store_file = options.rendezvous_file;
  o.cuda = options.device != "cpu";
  TLT_RETURN_IF_ERROR(device::make_current(options.device));  // NCCL takes the current device
  if (local && options.rank == 0) {
    StatusOr<std::string> file = local_rendezvous_file(job);
    if (!file.ok()) return file.status();
    o.store_file = *file;
  }
  StatusOr<std::unique_ptr<DataParallelGroup>> group = DataParallelGroup::open(o);
  if (!group.ok()) return group.status();
  if (local && options.rank == 0) {
    TLT_RETURN_IF_ERROR(start_local_workers(job, options, o.world, o.store_file, workers));
  }
  TLT_RETURN_IF_ERROR((*group)->join());
  return group;
}

}  // namespace

std::string job_base_dir(const api::TSTPretrainJob& job) {
  return job.spec.checkpoint.path.empty() ? ".tlt/" + job.metadata.name : job.spec.checkpoint.path;
}

RunPlan run_plan(const api::TSTPretrainJobSpec& s, int vocab, const std::string& label,
                 bool superposition, bool resume) {
  RunPlan p;
  p.preset = s.model.effective_preset();
  p.model_path = s.model.path, p.model_format = s.model.format;
  p.model_dtype = s.model.dtype;
  StatusOr<DataTokenizer> tok = data_tokenizer(s);  // it already served to tokenize the corpus
  if (tok.ok() && tok->hf) p.tokenizer_source = tok->path;
  p.vocab = vocab;
  p.steps = s.training.steps, p.warmup = s.training.schedule.warmup_steps;
  p.decay_fraction = s.training.schedule.decay_fraction;
  p.learning_rate = s.training.learning_rate, p.weight_decay = s.training.weight_decay;
  p.grad_clip = s.training.grad_clip;
  p.superposition = superposition && s.superposition.enabled, p.bag = s.superposition.bag_size;
  p.ratio = s.superposition.ratio, p.weighting = s.superposition.weighting;
  p.batch = s.training.batch_size, p.positions = s.training.seq_len;
  p.eval_every = s.training.eval_every_steps, p.eval_batches = s.training.eval_batches;
  p.seed = uint64_t(s.training.seed);
  p.checkpoint_every = s.checkpoint.every_steps;
  p.resume = resume;
  if (!s.checkpoint.path.empty()) p.checkpoint_dir = s.checkpoint.path + "/" + label;
  return p;
}

StatusOr<std::unique_ptr<JobRank>> JobRank::set_up(const api::TSTPretrainJob& job,
                                                   const RankOptions& options, std::ostream& log) {
  std::unique_ptr<JobRank> rank(new JobRank());
  StatusOr<JobDocuments> docs = job_documents(job.spec, log);
  if (!docs.ok()) return docs.status();
  rank->docs_ = std::move(*docs);
  int world = job.spec.workers.replicas;
  if (world <= 1) return rank;
  StatusOr<std::unique_ptr<DataParallelGroup>> group = join_group(job, options, rank->workers_);
  if (!group.ok()) {
    std::string failed = rank->workers_.wait(5);
    if (!failed.empty()) failed = "\n" + failed.substr(0, failed.size() - 1);
    return Status(group.status().code(), "data-parallel rank " + std::to_string(options.rank) +
                                             " of " + std::to_string(world) + ": " +
                                             group.status().message() + failed);
  }
  rank->group_ = std::move(*group);
  return rank;
}

JobRank::~JobRank() = default;

Collective* JobRank::collective() const {
  return group_ ? group_->collective() : nullptr;
}

std::string JobRank::finish(int timeout_s) {
  group_.reset();
  return workers_.wait(timeout_s);
}

}  // namespace tlt::tst
