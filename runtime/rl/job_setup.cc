#include "runtime/rl/job_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "runtime/data/token_file.h"

namespace tlt::rl {
namespace {
namespace fs = std::filesystem;

// Writing SmolLM2's 540 MB policy to disk took 4-10 s a step against 1.0 s to /dev/shm, so
// scratch goes to memory when this much is free there.
constexpr uint64_t kScratchRoom = 4ull << 30;
constexpr const char* kShm = "/dev/shm";

// Removes /dev/shm/tlt-run-PID-* left by processes that no longer exist.
void remove_orphaned_scratch() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kShm, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("tlt-run-", 0) != 0) continue;
    long pid = std::atol(name.c_str() + 8);
    if (pid > 0 && pid != long(::getpid()) && !fs::exists("/proc/" + std::to_string(pid), ec))
      fs::remove_all(e.path(), ec);
  }
}

// The plan of one run (`label`: "tlt" or "baseline") of the job.
RLRunPlan run_plan(const api::RLJob& job, const JobRunOptions& options, const std::string& base,
                   const std::string& label, bool baseline) {
  const api::RLJobSpec& spec = job.spec;
  RLRunPlan plan = plan_from_spec(job, baseline);
  plan.run_dir = base + "/" + label + "/run";
  if (!spec.checkpoint.path.empty()) plan.checkpoint_dir = spec.checkpoint.path + "/" + label;
  plan.resume = options.resume;
  plan.listen_port = options.listen_port;
  plan.weight_sync_port = options.weight_sync_port;
  if (options.trainer_world > 0) plan.trainer_ranks = options.trainer_world;
  plan.trainer_group_port = options.trainer_group_port;
  plan.trainer_group_host = options.trainer_group_host;
  plan.trainer_dir = base + "/" + label + "/trainers";
  plan.trainer_job_file = plan.trainer_dir + "/job.json";
  if (plan.listen_port > 0) {
    // A cluster job's drafter pods come and go with the rebalancer: a worker slot for every
    // pod maxReplicas allows; at the start only the spec's replicas are awaited.
    int slots = std::max(spec.roles.drafter.replicas, spec.roles.drafter.max_replicas);
    plan.drafter_pods_at_start = plan.drafter_role_workers;
    plan.workers += slots - plan.drafter_role_workers;
    plan.drafter_role_workers = slots;
  }
  return plan;
}

}  // namespace

RLRunPlan plan_from_spec(const api::RLJob& job, bool baseline) {
  const api::RLJobSpec& s = job.spec;
  RLRunPlan p;
  p.job = job.metadata.name;
  p.model = s.model, p.task = s.task, p.reward = s.reward, p.algorithm = s.algorithm;
  p.speculative = s.speculative, p.drafter = s.drafter, p.checkpoint = s.checkpoint;
  p.report = s.report;
  p.drafter_role_workers = s.roles.drafter.replicas;
  p.workers = std::max(1, s.roles.rollout.replicas) + p.drafter_role_workers;
  p.trainer_ranks = std::max(1, s.roles.trainer.replicas);
  p.baseline = baseline;
  p.cache_dir = data::cache_root();
  std::error_code ec;
  p.worker_exe = fs::read_symlink("/proc/self/exe", ec).string();
  if (const char* f = std::getenv("TLT_FREEZE_DRAFTER_AFTER"))
    p.freeze_drafter_after = std::atoll(f);
  return p;
}

std::string job_base_dir(const api::RLJob& job) {
  const std::string& path = job.spec.checkpoint.path;
  return path.empty() ? ".tlt/" + job.metadata.name : path;
}

std::vector<JobRun> job_runs(const api::RLJob& job, const JobRunOptions& options) {
  std::vector<std::pair<std::string, bool>> runs;  // (label, baseline)
  if (!options.baseline) runs.push_back({"tlt", false});
  if (options.baseline || options.compare) runs.push_back({"baseline", true});
  std::string base = job_base_dir(job);
  std::vector<JobRun> out;
  for (const auto& [label, baseline] : runs)
    out.push_back({label, run_plan(job, options, base, label, baseline)});
  return out;
}

ScratchDir::ScratchDir(const std::string& fallback, const std::string& label) : path_(fallback) {
  const char* where = std::getenv("TLT_RUN_SCRATCH");
  if (where != nullptr && std::string(where) == "job") return;
  std::error_code ec;
  fs::space_info room = fs::space(kShm, ec);
  if (ec || room.available < kScratchRoom) return;
  remove_orphaned_scratch();
  std::string dir = std::string(kShm) + "/tlt-run-" + std::to_string(::getpid()) + "-" + label;
  if (fs::create_directories(dir, ec) || fs::is_directory(dir, ec)) path_ = dir, owned_ = true;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (owned_) fs::remove_all(path_, ec);
}

}  // namespace tlt::rl
