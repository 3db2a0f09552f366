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

#include "api/encode.h"
#include "api/labels.h"
#include "runtime/cli/metrics_endpoint.h"
#include "runtime/cluster/job_secret.h"
#include "runtime/cluster/link.h"
#include "runtime/device/device.h"
#include "runtime/metrics/metrics.h"
#include "runtime/report/job_report.h"
#include "runtime/rl/job_setup.h"
#include "runtime/rl/run.h"
#include "runtime/rl/run_metrics.h"
#include "runtime/rl/trainer_ranks.h"
#include "runtime/rl/worker.h"

namespace tlt::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop.store(true);
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
    std::vector<double> busy = rl::busy_ratios(r);
    double busy_sum = 0;
    int busy_n = 0;
    for (double b : busy)
      if (b >= 0) busy_sum += b, ++busy_n;
    if (busy_n > 0)
      line << std::setprecision(2) << " gpu_busy=" << busy_sum / busy_n
           << " gpu_busy_from=" << rl::busy_source(r);
    if (r.restarts) line << " restarts=" << r.restarts;
    if (r.unpaired_connections) line << " unpaired_connections=" << r.unpaired_connections;
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

// The job secret (runtime/cluster/job_secret.h). A local run (no listen port) makes one when
// TLT_JOB_SECRET is unset and puts it in this process's environment, which its worker processes
// inherit; a trainer pod (listen_port > 0) must find the job's (the mounted Secret), and fails
// here, before any model is loaded, when it cannot. False after saying why on `err`.
bool prepare_job_secret(const RLRunFlags& flags, std::ostream& err) {
  StatusOr<std::string> secret = cluster::ensure_job_secret(flags.listen_port <= 0);
  if (!secret.ok()) err << "tlt run: " << secret.status().message() << "\n";
  return secret.ok();
}

// A local run's trainer ranks 1..N-1 read the job from plan.trainer_job_file. False after
// saying why on `err`.
bool write_trainer_job(const api::RLJob& job, const rl::RLRunPlan& plan, std::ostream& err) {
  std::error_code ec;
  fs::create_directories(plan.trainer_dir, ec);
  std::ofstream file(plan.trainer_job_file);
  file << api::to_json(job).dump(2) << "\n";
  if (ec || !file.flush()) {
    err << "tlt run: cannot write the trainer ranks' job file " << plan.trainer_job_file << "\n";
    return false;
  }
  return true;
}

// How often a local run whose trainer group failed starts again.
constexpr int kTrainerGroupRestarts = 2;

// The steps of `plan`'s last checkpoint (0: none).
int64_t checkpointed_steps(const rl::RLRunPlan& plan) {
  if (plan.checkpoint_dir.empty()) return 0;
  std::string latest;
  std::ifstream(plan.checkpoint_dir + "/latest") >> latest;  // "step-N"
  return latest.rfind("step-", 0) == 0 ? std::atoll(latest.c_str() + 5) : 0;
}

// run_rl, again from the last checkpoint (from the start without one) when a local run's trainer
// group failed (a rank process died or hung: rl::trainer_group_failed), with fresh rank
// processes, at most kTrainerGroupRestarts times. *completed keeps the steps up to where each
// run resumed.
StatusOr<rl::RLRunResult> run_restarting_ranks(rl::RLRunPlan plan, const rl::RunCallbacks& cb,
                                               rl::RLRunResult* completed, std::ostream& out) {
  for (int restarts = 0;; ++restarts) {
    StatusOr<rl::RLRunResult> res = rl::run_rl(plan, cb, &g_stop);
    if (res.ok() || plan.listen_port > 0 || restarts == kTrainerGroupRestarts || g_stop.load() ||
        !rl::trainer_group_failed(res.status()))
      return res;
    const int64_t from = checkpointed_steps(plan);
    plan.resume = from > 0;
    auto& steps = completed->steps;
    steps.erase(std::remove_if(steps.begin(), steps.end(),
                               [from](const rl::StepReport& r) { return r.step > from; }),
                steps.end());
    out << "tlt run: " << res.status().message() << "\ntlt run: restart " << restarts + 1 << " of "
        << kTrainerGroupRestarts << ": the trainer ranks start again and the run "
        << (from > 0 ? "resumes after step " + std::to_string(from) : "starts over") << "\n"
        << std::flush;
  }
}

}  // namespace

int rl_worker_command() {
  return rl::run_worker(0, 1);
}

int rl_remote_worker(const std::string& host, int port, int index, const std::string& work_dir,
                     std::ostream& out, std::ostream& err) {
  return rl::run_remote_worker(host, port, index, work_dir, out, err);
}

int run_rl_job(const api::RLJob& job, const RLRunFlags& flags, std::ostream& out,
               std::ostream& err) {
  const api::RLJobSpec& spec = job.spec;
  // Before anything else (the secret, the warm starts, the workers): a device that cannot be had
  // ends the job here. The driver resolves the same request again, as each worker does.
  StatusOr<device::Placement> placement =
      device::resolve_device(spec.model.device, device::probe_inventory());
  if (!placement.ok()) {
    err << "tlt run: " << placement.status().message() << "\n";
    return 1;
  }
  out << placement->line() << "\n";
  report::JobReport rep(flags.report_dir.empty() ? fs::path(rl::job_base_dir(job)) / "report"
                                                 : fs::path(flags.report_dir),
                        job.metadata.name, job.kind);
  rep.set_device(placement->description());
  if (!prepare_job_secret(flags, err)) return 1;  // before any thread reads the environment
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  MetricsEndpoint endpoint = start_metrics(job.metadata.name, spec.metrics.port, out, err);
  std::unique_ptr<Attachment> attachment;
  if (!flags.attach_namespace.empty()) {
    StatusOr<std::unique_ptr<Attachment>> a = attach(job, flags, out, err);
    if (!a.ok()) return 1;
    attachment = std::move(*a);
  }
  rl::JobRunOptions options;
  options.baseline = flags.baseline, options.compare = flags.compare;
  options.resume = flags.resume, options.listen_port = flags.listen_port;
  options.weight_sync_port = flags.weight_sync_port;
  options.trainer_world = flags.trainer_world;
  options.trainer_group_port = flags.trainer_group_port;
  options.trainer_group_host = flags.trainer_group_host;
  for (rl::JobRun& run : rl::job_runs(job, options)) {
    const std::string& label = run.label;
    rl::RLRunPlan& plan = run.plan;
    rl::ScratchDir scratch(plan.run_dir, label);
    plan.run_dir = scratch.path();
    if (plan.trainer_ranks > 1 && plan.listen_port <= 0 && !write_trainer_job(job, plan, err))
      return 1;
    out << label << ": scratch " << plan.run_dir
        << (scratch.in_memory() ? " (in memory, removed when the run ends)" : "") << "\n";
    plan.samples_path = rep.samples_path(label).string();
    Progress progress(out, label, plan.algorithm.steps);
    rl::RunCallbacks cb = callbacks(progress, attachment.get(), label);
    rl::RLRunResult completed;  // the steps done, for the report of a run that fails
    cb.step = [&completed, shown = cb.step](const rl::StepReport& r) {
      completed.steps.push_back(r);
      shown(r);
    };
    rl::publish_to(endpoint.metrics.get(),
                   rl::WorkerNames{job.metadata.name, spec.roles.rollout.replicas}, plan.workers,
                   &cb);
    StatusOr<rl::RLRunResult> res = run_restarting_ranks(plan, cb, &completed, out);
    if (!res.ok()) {
      // One prefix: the TLT run's label ("tlt") would read as a second program name.
      err << "tlt run: " << (label == "tlt" ? "" : label + " run: ") << res.status().message()
          << "\n";
      // Input refused before any step (InvalidArgument: a field and its fix) writes nothing;
      // a run that failed under way keeps the report of what it completed.
      if (completed.steps.empty() && res.status().code() == StatusCode::kInvalidArgument) return 1;
      rep.add_failed_rl_run(label, completed, res.status().message());
      rep.write_summary();
      const size_t n = completed.steps.size();
      err << "tlt run: the report of the " << n << (n == 1 ? " step" : " steps")
          << " completed before the failure: " << rep.summary_path().string() << "\n";
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
        << 100.0 * j["reclaimedShare"].get<double>() << "%, GPU busy "
        << 100.0 * j["gpuBusyRatio"].get<double>() << "% of the rollout phases (by the "
        << j["gpuBusyFrom"].get<std::string>() << ")\n";
  }
  // The last values of every metric, as Prometheus would have scraped them at the end.
  std::string steps_svg = rep.finish_rl(endpoint.metrics.get());
  out << "report: " << rep.summary_path().string()
      << (steps_svg.empty() ? " (no pictures: install gnuplot-nox)" : ", " + steps_svg) << "\n";
  return 0;
}

}  // namespace tlt::cli
