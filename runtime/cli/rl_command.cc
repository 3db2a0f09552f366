#include "runtime/cli/rl_command.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "api/labels.h"
#include "runtime/cli/metrics_endpoint.h"
#include "runtime/cluster/link.h"
#include "runtime/data/token_file.h"
#include "runtime/metrics/metrics.h"
#include "runtime/report/job_report.h"
#include "runtime/rl/rendezvous.h"
#include "runtime/rl/run.h"
#include "runtime/rl/run_metrics.h"
#include "runtime/rl/worker.h"

namespace tlt::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop.store(true);
}

rl::RLRunPlan plan_from(const api::RLJob& job, bool baseline) {
  const api::RLJobSpec& s = job.spec;
  rl::RLRunPlan p;
  p.job = job.metadata.name;
  p.preset = s.model.effective_preset();
  p.model_path = s.model.path, p.model_format = s.model.format, p.model_dtype = s.model.dtype;
  p.task = s.task.name, p.task_seed = uint64_t(s.task.seed), p.held_out = s.task.held_out;
  p.task_free_text = s.task.free_text_answer(!s.model.path.empty());
  const api::AlgorithmSpec& a = s.algorithm;
  p.steps = a.steps, p.prompts_per_step = a.prompts_per_step, p.group_size = a.group_size;
  p.max_response_tokens = a.max_response_tokens;
  p.temperature = a.temperature, p.top_p = a.top_p, p.learning_rate = a.learning_rate;
  p.kl_coef = a.kl_coef, p.clip = a.clip_ratio, p.seed = uint64_t(a.seed);
  p.loss_aggregation = a.loss_aggregation;
  p.warm_start_steps = a.effective_warm_start_steps(!s.model.path.empty());
  p.warm_start_learning_rate = a.warm_start_learning_rate;
  p.warm_start_max_prompt_chars = a.warm_start_max_prompt_chars;
  p.warm_start_unmarked_answers = a.warm_start_unmarked_answers;
  p.drafter_role_workers = s.roles.drafter.replicas;
  p.workers = std::max(1, s.roles.rollout.replicas) + p.drafter_role_workers;
  p.baseline = baseline;
  p.speculative = s.speculative.enabled;
  p.activation_threshold = s.speculative.activation_threshold;
  p.arms = s.speculative.arms;
  p.ngram_shortcut = s.speculative.ngram_shortcut;
  p.draft_confidence = s.speculative.draft_confidence;
  p.drafter_catch_up_limit = s.speculative.drafter_catch_up_limit;
  p.selector = s.speculative.selector.type, p.epsilon = s.speculative.selector.epsilon;
  p.buckets = s.speculative.selector.buckets, p.window = s.speculative.selector.window;
  p.selector_value = s.speculative.selector.value;
  p.selector_exploration = s.speculative.selector.exploration;
  p.selector_pooled = s.speculative.selector.pooled;
  p.drafter_layers = s.drafter.layers;
  p.drafter_train_levels = s.drafter.train_levels;
  p.drafter_vocab_subset = s.drafter.vocab_subset;
  p.drafter_warm_start_steps = s.drafter.warm_start_steps;
  p.drafter_warm_start_prompts = s.drafter.warm_start_prompts;
  p.drafter_training = s.drafter.training.enabled;
  p.drafter_learning_rate = s.drafter.training.learning_rate;
  p.min_idle_workers = s.drafter.training.min_idle_workers;
  p.buffer_steps = s.drafter.training.buffer_steps;
  p.drafter_batch = s.drafter.training.batch_size;
  p.checkpoint_every = s.checkpoint.every_steps, p.checkpoint_keep = s.checkpoint.keep;
  p.cache_dir = data::cache_root();
  std::error_code ec;
  p.worker_exe = fs::read_symlink("/proc/self/exe", ec).string();
  if (const char* f = std::getenv("TLT_FREEZE_DRAFTER_AFTER"))
    p.freeze_drafter_after = std::atoll(f);
  return p;
}

// The live line on a terminal, a log line per step otherwise.
class Progress {
 public:
  Progress(std::ostream& out, std::string label, int64_t steps)
      : out_(out), label_(std::move(label)), steps_(steps), tty_(isatty(STDOUT_FILENO)) {}
  // `what`: "warm start" (the policy's) or "drafter warm start".
  void warm_start(const char* what, int64_t step, double loss) {
    if (tty_) {
      out_ << "\r" << label_ << " " << what << " step " << step << " loss " << std::fixed
           << std::setprecision(3) << loss << "   " << std::flush;
    } else if (step % 100 == 0) {
      out_ << label_ << " " << what << " step " << step << " loss " << std::fixed
           << std::setprecision(3) << loss << std::endl;
    }
  }
  void step(const rl::StepReport& r) {
    elapsed_ += r.step_seconds;
    double eta = elapsed_ / double(++done_) * double(steps_ - r.step);
    std::ostringstream line;
    line << label_ << " step=" << r.step << "/" << steps_ << std::fixed << std::setprecision(3)
         << " reward=" << r.reward_mean << std::setprecision(2)
         << " rollout_s=" << r.rollout_seconds << " update_s=" << r.update_seconds
         << " update_positions=" << r.update_positions << " accept_len=" << r.accept_length
         << " reclaimed_ws=" << r.reclaimed_worker_seconds << " idle_ws=" << r.idle_worker_seconds
         << " drafter=v" << r.drafter_version << std::setprecision(0) << " eta_s=" << eta;
    if (r.restarts) line << " restarts=" << r.restarts;
    if (tty_) {
      out_ << "\r" << line.str() << "   " << (r.step == steps_ ? "\n" : "") << std::flush;
    } else {
      out_ << line.str() << std::endl;
    }
  }
  void log(const std::string& s) { out_ << (tty_ ? "\r" : "") << label_ << ": " << s << std::endl; }

 private:
  std::ostream& out_;
  std::string label_;
  int64_t steps_;
  bool tty_;
  double elapsed_ = 0;
  int64_t done_ = 0;
};

// The run's side of `--attach`: assignments in, progress out; failures are warnings, each said
// once until the link works again.
class Attachment {
 public:
  Attachment(std::unique_ptr<cluster::ClusterLink> link, int rollout_replicas, std::ostream& err)
      : link_(std::move(link)), rollout_replicas_(rollout_replicas), err_(err) {}

  std::vector<int> assignments() {
    StatusOr<std::vector<int>> a = link_->drafter_assignments(rollout_replicas_);
    if (note(a.status(), "reading the rebalancer's assignments")) last_ = *a;
    return last_;
  }

  void progress(const rl::StepReport& r, const std::string& mode) {
    json p = {{"step", r.step},
              {"reward", r.reward_mean},
              {"reclaimedGPUSeconds", reclaimed_ += r.reclaimed_worker_seconds},
              {"idleGPUSeconds", idle_ += r.idle_worker_seconds},
              {"drafterVersion", r.drafter_version},
              {"acceptLength", r.accept_length},
              {"drafterWorkers", r.drafter_workers},
              {"mode", mode},
              {"time", now_rfc3339()}};
    note(link_->report_progress(api::pod_name(link_->job(), "trainer", 0), p),
         "reporting progress");
  }

 private:
  static std::string now_rfc3339() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
  }
  // True when `s` is OK; a warning on the first failure after a success (and the reverse).
  bool note(const Status& s, const std::string& what) {
    if (!s.ok() && !failing_) {
      err_ << "tlt run: warning: --attach " << link_->namespace_() << ": " << what << ": "
           << s.message() << " (the run goes on; assignments stay as they were)\n";
    } else if (s.ok() && failing_) {
      err_ << "tlt run: --attach " << link_->namespace_() << ": the apiserver answers again\n";
    }
    failing_ = !s.ok();
    return s.ok();
  }
  std::unique_ptr<cluster::ClusterLink> link_;
  const int rollout_replicas_;  // pods <job>-rollout-0 .. -(n-1) are read
  std::ostream& err_;
  std::vector<int> last_;
  double reclaimed_ = 0, idle_ = 0;
  bool failing_ = false;
};

// --attach: the link to the job's objects in the cluster (errors are said on `err`).
StatusOr<std::unique_ptr<Attachment>> attach(const api::RLJob& job, const RLRunFlags& flags,
                                             std::ostream& out, std::ostream& err) {
  std::string kubeconfig = flags.kubeconfig;
  if (kubeconfig.empty() && std::getenv("KUBECONFIG")) kubeconfig = std::getenv("KUBECONFIG");
  StatusOr<std::unique_ptr<cluster::ClusterLink>> link =
      cluster::ClusterLink::connect(kubeconfig, flags.attach_namespace, job.metadata.name);
  if (!link.ok()) {
    err << "tlt run: --attach " << flags.attach_namespace << ": " << link.status().message()
        << " (give --kubeconfig FILE or set KUBECONFIG)\n";
    return link.status();
  }
  out << "tlt run: attached to RLJob " << flags.attach_namespace << "/" << job.metadata.name
      << ": assignments from pods " << job.metadata.name << "-rollout-<i>, progress to "
      << job.metadata.name << "-trainer-0\n";
  return std::make_unique<Attachment>(std::move(*link), job.spec.roles.rollout.replicas, err);
}

// Scratch that a run writes and reads back within the run: the policy each step pushes to the
// rollout workers (a real model's is hundreds of MB a step), drafter versions, hidden-state
// buffers. Memory is the place for it: writing SmolLM2's 540 MB policy to this project's
// machines' disk took 4-10 s a step against 1.0 s to /dev/shm. So it goes under /dev/shm when
// that has kScratchRoom free (a pod's default 64 MB does not; then the job's directory), in a
// directory named after this process, removed when the run ends (ScratchDir) or, after a
// crash, by the next run that finds its process gone. TLT_RUN_SCRATCH=job keeps it in the job's
// directory (kept after the run, as a record of the last policy the workers loaded).
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

// The scratch directory of one run; removed on destruction when it is under /dev/shm (the
// job's directory keeps its own, as before).
class ScratchDir {
 public:
  ScratchDir(const std::string& fallback, const std::string& label) : path_(fallback) {
    const char* where = std::getenv("TLT_RUN_SCRATCH");
    if (where != nullptr && std::string(where) == "job") return;
    std::error_code ec;
    fs::space_info room = fs::space(kShm, ec);
    if (ec || room.available < kScratchRoom) return;
    remove_orphaned_scratch();
    std::string dir = std::string(kShm) + "/tlt-run-" + std::to_string(::getpid()) + "-" + label;
    if (fs::create_directories(dir, ec) || fs::is_directory(dir, ec)) path_ = dir, owned_ = true;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (owned_) fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  bool in_memory() const { return owned_; }

 private:
  std::string path_;
  bool owned_ = false;
};

// The plan of one run (`label`: "tlt" or "baseline") of the job.
rl::RLRunPlan run_plan(const api::RLJob& job, const RLRunFlags& flags, const std::string& base,
                       const std::string& label, bool baseline) {
  const api::RLJobSpec& spec = job.spec;
  rl::RLRunPlan plan = plan_from(job, baseline);
  plan.run_dir = base + "/" + label + "/run";
  if (!spec.checkpoint.path.empty()) plan.checkpoint_dir = spec.checkpoint.path + "/" + label;
  plan.resume = flags.resume;
  plan.listen_port = flags.listen_port;
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

// The run's callbacks: progress on the terminal, and the attachment's assignments and progress.
rl::RunCallbacks callbacks(Progress& progress, Attachment* attachment, const std::string& label) {
  rl::RunCallbacks cb;
  cb.warm_start = [&progress](int64_t s, double l) { progress.warm_start("warm start", s, l); };
  cb.drafter_warm_start = [&progress](int64_t s, double l) {
    progress.warm_start("drafter warm start", s, l);
  };
  cb.step = [&progress, attachment, label](const rl::StepReport& r) {
    progress.step(r);
    if (attachment) attachment->progress(r, label);
  };
  if (attachment)
    cb.drafter_assignments = [attachment](int64_t) { return attachment->assignments(); };
  cb.log = [&progress](const std::string& s) { progress.log(s); };
  return cb;
}

// What a run stopped by a signal says about resuming it.
std::string stopped_line(const rl::RLRunResult& res, const rl::RLRunPlan& plan) {
  // Nothing finished, so nothing was saved: --resume would find no checkpoint.
  if (res.steps.empty())
    return "tlt run: stopped by signal before step 1 finished; no checkpoint was written; "
           "run again without --resume\n";
  std::string after =
      "tlt run: stopped by signal after step " + std::to_string(res.steps.back().step);
  if (plan.checkpoint_dir.empty())
    return after +
           "; no checkpoint (spec.checkpoint.path is empty), so the run cannot be resumed\n";
  return after + "; checkpoint in " + plan.checkpoint_dir + "; continue with --resume\n";
}

}  // namespace

int rl_worker_command() {
  return rl::run_worker(0, 1);
}

int rl_remote_worker(const std::string& host, int port, int index, const std::string& work_dir,
                     std::ostream& out, std::ostream& err) {
  std::error_code ec;
  fs::create_directories(fs::path(work_dir) / "buffer", ec);
  if (ec) {
    err << "tlt run-role: " << work_dir << ": " << ec.message() << " (set TLT_WORK_DIR)\n";
    return 1;
  }
  out << "tlt run-role: rollout " << index << " connecting to the trainer at " << host << ":"
      << port << "\n"
      << std::flush;
  StatusOr<int> fd = rl::connect_worker(host, port, index, 600 * 1000);
  if (!fd.ok()) {
    err << "tlt run-role: " << fd.status().message() << "\n";
    return 1;
  }
  out << "tlt run-role: rollout " << index << " connected; files under " << work_dir << "\n"
      << std::flush;
  int rc = rl::run_worker(*fd, *fd, work_dir);
  ::close(*fd);
  return rc;
}

int run_rl_job(const api::RLJob& job, const RLRunFlags& flags, std::ostream& out,
               std::ostream& err) {
  const api::RLJobSpec& spec = job.spec;
  std::string base =
      spec.checkpoint.path.empty() ? ".tlt/" + job.metadata.name : spec.checkpoint.path;
  report::JobReport rep(
      flags.report_dir.empty() ? fs::path(base) / "report" : fs::path(flags.report_dir),
      job.metadata.name, job.kind);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  MetricsEndpoint endpoint = start_metrics(job.metadata.name, spec.metrics.port, out, err);
  std::unique_ptr<Attachment> attachment;
  if (!flags.attach_namespace.empty()) {
    StatusOr<std::unique_ptr<Attachment>> a = attach(job, flags, out, err);
    if (!a.ok()) return 1;
    attachment = std::move(*a);
  }
  std::vector<std::pair<std::string, bool>> runs;
  if (!flags.baseline) runs.push_back({"tlt", false});
  if (flags.baseline || flags.compare) runs.push_back({"baseline", true});
  for (const auto& [label, baseline] : runs) {
    rl::RLRunPlan plan = run_plan(job, flags, base, label, baseline);
    ScratchDir scratch(plan.run_dir, label);
    plan.run_dir = scratch.path();
    out << label << ": scratch " << plan.run_dir
        << (scratch.in_memory() ? " (in memory, removed when the run ends)" : "") << "\n";
    Progress progress(out, label, plan.steps);
    rl::RunCallbacks cb = callbacks(progress, attachment.get(), label);
    rl::publish_to(endpoint.metrics.get(),
                   rl::WorkerNames{job.metadata.name, spec.roles.rollout.replicas}, plan.workers,
                   &cb);
    StatusOr<rl::RLRunResult> res = rl::run_rl(plan, cb, &g_stop);
    if (!res.ok()) {
      err << "tlt run: " << label << ": " << res.status().message() << "\n";
      return 1;
    }
    json j = rep.add_rl_run(label, *res, plan.workers);
    if (res->interrupted) {
      out << stopped_line(*res, plan);
      rep.write_summary();
      return 0;
    }
    out << label << ": " << report::held_out_line(*res) << "\n"
        << label << ": " << std::fixed << std::setprecision(1) << j["totalSeconds"].get<double>()
        << " s in " << res->steps.size() << " steps, reclaimed share of idle worker time "
        << 100.0 * j["reclaimedShare"].get<double>() << "%\n";
  }
  // The last values of every metric, as Prometheus would have scraped them at the end.
  std::string steps_svg = rep.finish_rl(endpoint.metrics.get());
  out << "report: " << rep.summary_path().string()
      << (steps_svg.empty() ? " (no pictures: install gnuplot-nox)" : ", " + steps_svg) << "\n";
  return 0;
}

}  // namespace tlt::cli
