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
#include "runtime/rl/rendezvous.h"
#include "runtime/rl/run.h"
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
  p.task = s.task.name, p.task_seed = uint64_t(s.task.seed), p.held_out = s.task.held_out;
  const api::AlgorithmSpec& a = s.algorithm;
  p.steps = a.steps, p.prompts_per_step = a.prompts_per_step, p.group_size = a.group_size;
  p.max_response_tokens = a.max_response_tokens;
  p.temperature = a.temperature, p.top_p = a.top_p, p.learning_rate = a.learning_rate;
  p.kl_coef = a.kl_coef, p.clip = a.clip_ratio, p.seed = uint64_t(a.seed);
  p.loss_aggregation = a.loss_aggregation;
  p.warm_start_steps = a.warm_start_steps, p.warm_start_learning_rate = a.warm_start_learning_rate;
  p.warm_start_max_prompt_chars = a.warm_start_max_prompt_chars;
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
  p.drafter_layers = s.drafter.layers;
  p.drafter_vocab_subset = s.drafter.vocab_subset;
  p.drafter_warm_start_steps = s.drafter.warm_start_steps;
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
         << " accept_len=" << r.accept_length << " reclaimed_ws=" << r.reclaimed_worker_seconds
         << " idle_ws=" << r.idle_worker_seconds << " drafter=v" << r.drafter_version
         << std::setprecision(0) << " eta_s=" << eta;
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

// The pod name and role of worker `w`, as the operator names a cluster job's pods: the rollout
// workers first, then the drafter pods.
std::string worker_role(const api::RLJob& job, int w) {
  return w < std::max(1, job.spec.roles.rollout.replicas) ? "rollout" : "drafter";
}
std::string worker_pod(const api::RLJob& job, int w) {
  int rollout = std::max(1, job.spec.roles.rollout.replicas);
  return job.metadata.name + "-" + worker_role(job, w) + "-" +
         std::to_string(w < rollout ? w : w - rollout);
}

void publish(metrics::RuntimeMetrics* m, const api::RLJob& job, const rl::StepReport& r,
             int workers) {
  if (!m) return;
  m->set_rl_step(r.step);
  m->set_rl_reward_mean(r.reward_mean);
  m->add_rollout_tokens(uint64_t(r.tokens));
  m->set_drafter_version(r.drafter_version);
  m->add_drafter_train_steps(uint64_t(r.drafter_steps));
  if (r.drafter_loss >= 0) m->set_drafter_loss(r.drafter_loss);
  (void)m->add_reclaimed_seconds(r.reclaimed_worker_seconds);
  (void)m->add_idle_seconds(r.idle_worker_seconds);
  if (r.accept_length >= 1) (void)m->observe_accept_length(r.accept_length);
  for (const auto& [arm, n] : r.arms)
    for (int64_t k = 0; k < n; ++k) (void)m->add_arm_selected(arm);
  // Busy share of each worker over the step's rollout phase (generating or training). A worker
  // with no interval was absent (a drafter pod's slot without a pod): no series for it.
  std::vector<double> busy(size_t(workers), 0.0);
  std::vector<bool> seen(size_t(workers), false);
  for (const rl::Interval& i : r.timeline) {
    if (i.worker < 0 || i.worker >= workers) continue;
    seen[size_t(i.worker)] = true;
    if (i.state != "released" && i.state != "idle" && i.end <= r.rollout_seconds + 1e-9)
      busy[size_t(i.worker)] += i.end - i.start;
  }
  for (int w = 0; w < workers; ++w) {
    if (!seen[size_t(w)]) continue;
    bool drafter = std::count(r.drafter_workers.begin(), r.drafter_workers.end(), w) > 0;
    m->set_drafter_assigned(worker_pod(job, w), drafter);
  }
  for (int w = 0; w < workers; ++w)
    if (r.rollout_seconds > 0 && seen[size_t(w)])
      (void)m->set_gpu_busy_ratio(worker_pod(job, w),
                                  std::min(1.0, busy[size_t(w)] / r.rollout_seconds));
}

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

// "held-out reward 0.078 (warm start) -> 0.112 after RL: +0.034, 95% CI [+0.012, +0.056], paired
// over 256 problems x 4 samples (improved)".
std::string held_out_line(const rl::RLRunResult& res) {
  const rl::PairedDifference& d = res.held_out_difference;
  if (d.n == 0) {
    return "held-out reward " + std::to_string(res.held_out_before) + " (warm start) -> " +
           std::to_string(res.held_out_after) +
           " after RL; no interval: set spec.task.heldOut to 64 or more for a paired comparison";
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "held-out reward %.3f (warm start) -> %.3f after RL: %+.3f, 95%% CI [%+.3f, "
                "%+.3f], paired over %lld problems x %lld samples (%s)",
                d.before, d.after, d.mean, d.lo, d.hi, static_cast<long long>(d.n),
                static_cast<long long>(res.held_out_samples),
                d.improved() ? "improved: the interval lies above 0"
                : d.hi < 0   ? "worse: the interval lies below 0"
                             : "no clear change: the interval contains 0");
  return buf;
}

json result_json(const rl::RLRunResult& res) {
  json steps = json::array();
  for (const rl::StepReport& s : res.steps) steps.push_back(rl::to_json(s));
  double gen = 0, idle = 0, reclaimed = 0, total = 0;
  for (const rl::StepReport& s : res.steps) {
    gen += s.generating_worker_seconds, idle += s.idle_worker_seconds;
    reclaimed += s.reclaimed_worker_seconds, total += s.step_seconds;
  }
  const rl::PairedDifference& d = res.held_out_difference;
  json held_out = {{"problems", d.n},
                   {"samplesPerProblem", res.held_out_samples},
                   {"before", d.before},
                   {"after", d.after},
                   {"difference", d.mean},
                   {"ci95", {d.lo, d.hi}},
                   {"improved", d.improved()},
                   {"beforePerProblem", res.held_out_before_per_problem},
                   {"afterPerProblem", res.held_out_after_per_problem}};
  return {{"steps", steps},
          {"heldOutRewardBefore", res.held_out_before},
          {"heldOutRewardAfter", res.held_out_after},
          {"heldOut", held_out},
          {"interrupted", res.interrupted},
          {"warmStart", res.warm_start},
          {"totalSeconds", total},
          {"generatingWorkerSeconds", gen},
          {"idleWorkerSeconds", idle},
          {"reclaimedWorkerSeconds", reclaimed},
          {"reclaimedShare", idle + reclaimed > 0 ? reclaimed / (idle + reclaimed) : 0.0}};
}

bool have_gnuplot() {
  return std::system("command -v gnuplot >/dev/null 2>&1") == 0;
}

bool gnuplot(const fs::path& script) {
  return std::system(("gnuplot '" + script.string() + "' >/dev/null 2>&1").c_str()) == 0;
}

// One step's per-worker timeline: a bar per worker, coloured by state.
std::string plot_timeline(const fs::path& dir, const std::string& label, const rl::StepReport& r,
                          int workers) {
  fs::path data = dir / ("timeline-" + label + ".tsv"),
           script = dir / ("timeline-" + label + ".gp");
  fs::path svg = dir / ("timeline-" + label + ".svg");
  const char* states[] = {"generating", "released", "training"};
  const char* titles[] = {"generating", "idle (done, waiting for the tail)",
                          "training the drafter"};
  const char* colors[] = {"#4477aa", "#cccccc", "#228833"};
  std::ofstream d(data);
  std::vector<int> used;
  for (int s = 0; s < 3; ++s) {
    int rows = 0;
    for (const rl::Interval& i : r.timeline)
      if (i.state == states[s] && i.end > i.start)
        d << (i.start + i.end) / 2 << "\t" << i.worker << "\t" << (i.end - i.start) / 2 << "\n",
            ++rows;
    if (rows == 0) d << "0\t-10\t0\n";  // keeps the index; drawn off-canvas
    d << "\n\n";
    used.push_back(rows);
  }
  d.close();
  std::ofstream g(script);
  g << "set terminal svg size 900," << 160 + 60 * workers << "\nset output '" << svg.string()
    << "'\nset title '" << label << ": rollout workers during step " << r.step
    << "'\nset xlabel 'seconds since the step began'\nset ytics 1\nset yrange [-0.6:"
    << workers - 0.4
    << "]\nset ylabel 'worker'\nset key outside below\nset style fill solid\nplot ";
  for (int s = 0; s < 3; ++s)
    g << (s ? ", " : "") << "'" << data.string() << "' index " << s
      << " using 1:2:3:(0.35) with boxxyerror lc rgb '" << colors[s] << "' title '" << titles[s]
      << "'";
  g << "\n";
  g.close();
  return gnuplot(script) ? svg.string() : "";
}

// Step time and reward over steps, for each mode that ran.
std::string plot_steps(const fs::path& dir, const std::vector<std::string>& labels) {
  fs::path script = dir / "steps.gp", svg = dir / "steps.svg";
  for (const std::string& l : labels) {
    std::ifstream in(dir / (l + ".json"));
    json j = json::parse(in, nullptr, false);
    std::ofstream d(dir / (l + "-steps.tsv"));
    d << "# step\tstep_seconds\treward\tacceptance\n";
    if (!j.is_discarded())
      for (const json& s : j.at("steps"))
        d << s.at("step") << "\t" << s.at("stepSeconds") << "\t" << s.at("rewardMean") << "\t"
          << s.at("acceptLength") << "\n";
  }
  std::ofstream g(script);
  g << "set terminal svg size 900,700\nset output '" << svg.string()
    << "'\nset multiplot layout 2,1\n"
    << "set grid\nset xlabel 'RL step'\nset ylabel 'step wall time (s)'\nset yrange [0:*]\nplot ";
  for (size_t i = 0; i < labels.size(); ++i)
    g << (i ? ", " : "") << "'" << (dir / (labels[i] + "-steps.tsv")).string()
      << "' using 1:2 with linespoints title '" << labels[i] << "'";
  g << "\nset ylabel 'mean reward'\nplot ";
  for (size_t i = 0; i < labels.size(); ++i)
    g << (i ? ", " : "") << "'" << (dir / (labels[i] + "-steps.tsv")).string()
      << "' using 1:3 with linespoints title '" << labels[i] << "'";
  g << "\nunset multiplot\n";
  g.close();
  return gnuplot(script) ? svg.string() : "";
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
  fs::path report =
      flags.report_dir.empty() ? fs::path(base) / "report" : fs::path(flags.report_dir);
  std::error_code ec;
  fs::create_directories(report, ec);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);

  // Per-worker series are labelled with the pod names the operator gives a cluster job's
  // rollout pods (<job>-rollout-<i>), so a local run and a cluster run read the same.
  MetricsEndpoint endpoint = start_metrics(job.metadata.name, spec.metrics.port, out, err);
  std::unique_ptr<metrics::RuntimeMetrics>& m = endpoint.metrics;
  std::unique_ptr<Attachment> attachment;
  if (!flags.attach_namespace.empty()) {
    std::string kubeconfig = flags.kubeconfig;
    if (kubeconfig.empty() && std::getenv("KUBECONFIG")) kubeconfig = std::getenv("KUBECONFIG");
    StatusOr<std::unique_ptr<cluster::ClusterLink>> link =
        cluster::ClusterLink::connect(kubeconfig, flags.attach_namespace, job.metadata.name);
    if (!link.ok()) {
      err << "tlt run: --attach " << flags.attach_namespace << ": " << link.status().message()
          << " (give --kubeconfig FILE or set KUBECONFIG)\n";
      return 1;
    }
    attachment =
        std::make_unique<Attachment>(std::move(*link), job.spec.roles.rollout.replicas, err);
    out << "tlt run: attached to RLJob " << flags.attach_namespace << "/" << job.metadata.name
        << ": assignments from pods " << job.metadata.name << "-rollout-<i>, progress to "
        << job.metadata.name << "-trainer-0\n";
  }

  std::vector<std::pair<std::string, bool>> runs;
  if (!flags.baseline) runs.push_back({"tlt", false});
  if (flags.baseline || flags.compare) runs.push_back({"baseline", true});
  std::vector<std::string> labels;
  json summary = {{"job", job.metadata.name}, {"kind", job.kind}};
  for (const auto& [label, baseline] : runs) {
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
    Progress progress(out, label, plan.steps);
    rl::RunCallbacks cb;
    cb.warm_start = [&](int64_t s, double l) { progress.warm_start("warm start", s, l); };
    cb.drafter_warm_start = [&](int64_t s, double l) {
      progress.warm_start("drafter warm start", s, l);
    };
    cb.step = [&](const rl::StepReport& r) {
      progress.step(r);
      publish(m.get(), job, r, plan.workers);
      if (attachment) attachment->progress(r, label);
    };
    if (attachment) {
      cb.drafter_assignments = [&](int64_t) { return attachment->assignments(); };
    }
    cb.log = [&](const std::string& s) { progress.log(s); };
    metrics::RuntimeMetrics* mp = m.get();
    cb.worker_state = [mp, &job](int w, const std::string& s) {
      if (mp) (void)mp->set_worker_state(worker_pod(job, w), worker_role(job, w), s);
    };
    StatusOr<rl::RLRunResult> res = rl::run_rl(plan, cb, &g_stop);
    if (!res.ok()) {
      err << "tlt run: " << label << ": " << res.status().message() << "\n";
      return 1;
    }
    json j = result_json(*res);
    std::ofstream(report / (label + ".json")) << j.dump(2) << "\n";
    summary[label] = {
        {"heldOutRewardBefore", res->held_out_before},
        {"heldOutRewardAfter", res->held_out_after},
        {"heldOutDifference", res->held_out_difference.mean},
        {"heldOutDifferenceCi95", {res->held_out_difference.lo, res->held_out_difference.hi}},
        {"totalSeconds", j["totalSeconds"]},
        {"reclaimedShare", j["reclaimedShare"]}};
    labels.push_back(label);
    if (res->interrupted) {
      if (res->steps.empty()) {
        // Nothing finished, so nothing was saved: --resume would find no checkpoint.
        out << "tlt run: stopped by signal before step 1 finished; no checkpoint was written; "
               "run again without --resume\n";
      } else if (plan.checkpoint_dir.empty()) {
        out << "tlt run: stopped by signal after step " << res->steps.back().step
            << "; no checkpoint (spec.checkpoint.path is empty), so the run cannot be resumed\n";
      } else {
        out << "tlt run: stopped by signal after step " << res->steps.back().step
            << "; checkpoint in " << plan.checkpoint_dir << "; continue with --resume\n";
      }
      std::ofstream(report / "report.json") << summary.dump(2) << "\n";
      return 0;
    }
    out << label << ": " << held_out_line(*res) << "\n"
        << label << ": " << std::fixed << std::setprecision(1) << j["totalSeconds"].get<double>()
        << " s in " << res->steps.size() << " steps, reclaimed share of idle worker time "
        << 100.0 * j["reclaimedShare"].get<double>() << "%\n";
    if (have_gnuplot() && !res->steps.empty()) {
      std::string t = plot_timeline(report, label, res->steps.back(), plan.workers);
      if (!t.empty()) summary[label]["timeline"] = t;
    }
  }
  // The last values of every metric, as Prometheus would have scraped them at the end.
  if (m) std::ofstream(report / "metrics.prom") << metrics::render(*m);
  std::string steps_svg = have_gnuplot() ? plot_steps(report, labels) : "";
  summary["steps"] = steps_svg;
  std::ofstream(report / "report.json") << summary.dump(2) << "\n";
  out << "report: " << (report / "report.json").string()
      << (steps_svg.empty() ? " (no pictures: install gnuplot-nox)" : ", " + steps_svg) << "\n";
  return 0;
}

}  // namespace tlt::cli
