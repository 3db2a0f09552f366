#include "runtime/cli/tst_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>

#include "api/labels.h"
#include "runtime/cli/metrics_endpoint.h"
#include "runtime/device/device.h"
#include "runtime/report/job_report.h"
#include "runtime/torch_env.h"
#include "runtime/tst/job_setup.h"

namespace tlt::cli {
namespace {
namespace fs = std::filesystem;

// Progress: a live line on a terminal, a log line every 10% otherwise.
class Progress {
 public:
  Progress(std::ostream& out, std::string label, int64_t steps)
      : out_(out), label_(std::move(label)), steps_(steps), tty_(isatty(STDOUT_FILENO)) {}
  void operator()(const tst::Point& p) {
    if (p.eval_loss >= 0) last_eval_ = p.eval_loss;
    elapsed_ += p.seconds;
    bool log_now =
        p.step == steps_ || p.eval_loss >= 0 || (steps_ >= 10 && p.step % (steps_ / 10) == 0);
    if (!tty_ && !log_now) return;
    double eta = p.step > 0 ? elapsed_ / p.step * (steps_ - p.step) : 0;
    std::ostringstream line;
    line << label_ << " step=" << p.step << "/" << steps_ << " phase=" << p.phase << std::fixed
         << std::setprecision(3) << " loss=" << p.loss << " eval_loss=" << last_eval_
         << std::setprecision(1) << " tokens=" << p.tokens_seen
         << " tokens_per_s=" << (p.seconds > 0 ? p.tokens_seen / std::max(elapsed_, 1e-9) : 0.0)
         << " eta_s=" << eta;
    if (tty_) {
      out_ << "\r" << line.str() << "   " << (p.step == steps_ ? "\n" : "") << std::flush;
    } else {
      out_ << line.str() << std::endl;  // a log reader sees each line as it happens
    }
  }

 private:
  std::ostream& out_;
  std::string label_;
  int64_t steps_;
  bool tty_;
  double last_eval_ = -1, elapsed_ = 0;
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// "tst", "baseline" or "tst,baseline": the runs of a job, for its worker processes.
std::string runs_of(const TSTRunFlags& f) {
  return f.baseline ? "baseline" : f.compare ? "tst,baseline" : "tst";
}

// The job's runs (TST, baseline or both) as one rank; rank 0 prints progress and writes the
// report, metrics and checkpoints. Returns the exit code.
int run_all(const api::TSTPretrainJob& job, const TSTRunFlags& flags, const tst::JobDocuments& docs,
            tst::Collective* group, const device::Placement& placement, std::ostream& out,
            std::ostream& err) {
  const api::TSTPretrainJobSpec& spec = job.spec;
  bool rank0 = flags.rank == 0;
  std::optional<report::JobReport> rep;
  if (rank0) {
    rep.emplace(flags.report_dir.empty() ? fs::path(tst::job_base_dir(job)) / "report"
                                         : fs::path(flags.report_dir),
                job.metadata.name, job.kind);
    rep->set_device(placement.description());
  }
  MetricsEndpoint endpoint;
  if (rank0) endpoint = start_metrics(job.metadata.name, spec.metrics.port, out, err);
  metrics::RuntimeMetrics* m = endpoint.metrics.get();
  auto run_one = [&](bool superposition,
                     const std::string& label) -> StatusOr<std::vector<tst::Point>> {
    tst::RunPlan plan = tst::run_plan(spec, docs.vocab, label, superposition, flags.resume);
    plan.device = placement.process_device(flags.rank);
    Progress progress(out, label, plan.steps);
    int64_t tokens_before = 0;  // tokens_seen is cumulative within one run
    auto on_point = [&](const tst::Point& p) {
      if (!rank0) return;
      progress(p);
      if (!m) return;
      (void)m->set_tst_phase(p.phase);
      m->set_tst_loss(p.loss);
      if (p.tokens_seen > tokens_before)
        m->add_tokens_seen(uint64_t(p.tokens_seen - tokens_before));
      tokens_before = p.tokens_seen;
    };
    return tst::run_pretraining(plan, docs.train, docs.held_out, on_point, group);
  };
  std::vector<std::pair<std::string, bool>> runs;
  if (!flags.baseline) runs.push_back({"tst", true});
  if (flags.baseline || flags.compare) runs.push_back({"baseline", false});
  for (const auto& [label, superposition] : runs) {
    StatusOr<std::vector<tst::Point>> pts = run_one(superposition, label);
    if (!pts.ok()) {
      err << "tlt run: " << label << (rank0 ? "" : " (rank " + std::to_string(flags.rank) + ")")
          << ": " << pts.status().message() << "\n";
      return 1;
    }
    if (!rank0) continue;
    rep->add_tst_run(label, *pts);
    out << label << ": final held-out loss " << pts->back().eval_loss << " after "
        << pts->back().flops << " FLOPs and " << pts->back().tokens_seen << " tokens\n";
  }
  if (!rank0) return 0;
  std::string picture = rep->finish_tst(runs.size() == 2 || flags.baseline, flags.baseline, m);
  out << "report: " << rep->summary_path().string()
      << (picture.empty() ? " (no picture: install gnuplot-nox)" : ", " + picture) << "\n";
  return 0;
}

}  // namespace

int run_tst_job(const api::TSTPretrainJob& job, const TSTRunFlags& flags, std::ostream& out,
                std::ostream& err) {
  int world = job.spec.workers.replicas;
  std::ostream quiet(nullptr);  // ranks > 0 print only errors
  std::ostream& log = flags.rank == 0 ? out : quiet;
  // Before the corpus, the group and the local workers: a device that cannot be had ends the job.
  StatusOr<device::Placement> placement =
      device::resolve_device(job.spec.model.device, device::probe_inventory());
  if (!placement.ok()) {
    err << "tlt run: " << placement.status().message() << "\n";
    return 1;
  }
  log << placement->line() << "\n";
  if (world > 1 && flags.rendezvous_host.empty()) {  // a local run's ranks share this machine
    std::string note = device::sharing_note(*placement, world, "data-parallel ranks");
    if (!note.empty()) log << "device: " << note << "\n";
  }
  tst::RankOptions options;
  options.device = placement->process_device(flags.rank);
  options.rank = flags.rank, options.rendezvous_host = flags.rendezvous_host;
  options.rendezvous_port = flags.rendezvous_port;
  options.rendezvous_file = flags.rendezvous_file;
  options.runs = runs_of(flags), options.resume = flags.resume;
  StatusOr<std::unique_ptr<tst::JobRank>> rank = tst::JobRank::set_up(job, options, log);
  if (!rank.ok()) {
    err << "tlt run: " << rank.status().message() << "\n";
    return 1;
  }
  if (world > 1) {
    log << "tlt run: data parallel over " << world << " ranks"
        << (flags.rendezvous_host.empty() ? " (worker processes on this machine)" : "") << "\n";
    if (flags.rank > 0)
      out << "tlt run-role: TSTPretrainJob " << job.metadata.name << " worker " << flags.rank
          << " of " << world << " joined on " << options.device << "\n";
  }
  int code = run_all(job, flags, (*rank)->documents(), (*rank)->collective(), *placement, log, err);
  std::string failed = (*rank)->finish(code == 0 ? 120 : 10);
  if (!failed.empty()) err << "tlt run: " << failed;
  if (flags.rank > 0 && code == 0)
    out << "tlt run-role: TSTPretrainJob " << job.metadata.name << " worker " << flags.rank
        << " done\n";
  return failed.empty() ? code : 1;
}

int run_tst_role(const api::TSTPretrainJob& job, int index, int port, std::ostream& out,
                 std::ostream& err) {
  int world = job.spec.workers.replicas;
  if (index >= world) {
    err << "tlt run-role: worker " << index << " has no rank: " << job.metadata.name
        << " has spec.workers.replicas " << world << "\n";
    return 1;
  }
  TSTRunFlags f;
  f.rank = index, f.rendezvous_port = port;
  f.rendezvous_file = env_or("TLT_RENDEZVOUS_FILE", "");  // a local run's workers
  if (world > 1) {
    f.rendezvous_host =
        env_or("TLT_RENDEZVOUS_ADDRESS", api::pod_name(job.metadata.name, "workers", 0) + "." +
                                             env_or("TLT_SERVICE", job.metadata.name + "-tst"));
  }
  std::string runs = env_or("TLT_TST_RUNS", "tst");
  f.baseline = runs == "baseline", f.compare = runs == "tst,baseline";
  f.resume = env_or("TLT_RESUME", "0") == "1";
  int threads = std::atoi(env_or("TLT_THREADS", "0").c_str());
  if (threads > 0) runtime::configure_threads(threads);
  return run_tst_job(job, f, out, err);
}

}  // namespace tlt::cli
