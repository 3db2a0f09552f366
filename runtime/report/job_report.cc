#include "runtime/report/job_report.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "api/validate.h"
#include "runtime/rl/samples.h"

namespace tlt::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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
  for (int s = 0; s < 3; ++s) {
    int rows = 0;
    for (const rl::Interval& i : r.timeline)
      if (i.state == states[s] && i.end > i.start)
        d << (i.start + i.end) / 2 << "\t" << i.worker << "\t" << (i.end - i.start) / 2 << "\n",
            ++rows;
    if (rows == 0) d << "0\t-10\t0\n";  // keeps the index; drawn off-canvas
    d << "\n\n";
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

// Step time and reward over steps, for each RL run that ran (from its <label>.json).
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

// Held-out loss against FLOPs; returns the picture's path or "".
std::string plot_loss(const fs::path& dir, bool with_baseline) {
  if (!have_gnuplot()) return "";
  fs::path script = dir / "loss-vs-flops.gp", svg = dir / "loss-vs-flops.svg";
  std::ofstream g(script);
  g << "set terminal svg size 800,500\nset output '" << svg.string() << "'\n"
    << "set xlabel 'training FLOPs'\nset ylabel 'held-out next-token loss'\nset grid\n"
    << "plot '" << (dir / "tst.tsv").string() << "' using 1:2 with linespoints title 'TST'";
  if (with_baseline)
    g << ", '" << (dir / "baseline.tsv").string()
      << "' using 1:2 with linespoints title 'baseline'";
  g << "\n";
  g.close();
  return gnuplot(script) ? svg.string() : "";
}

json points_json(const std::vector<tst::Point>& pts) {
  json a = json::array();
  for (const tst::Point& p : pts) {
    a.push_back({{"step", p.step},
                 {"phase", p.phase},
                 {"flops", p.flops},
                 {"tokensSeen", p.tokens_seen},
                 {"heldOutLoss", p.eval_loss},
                 {"trainLoss", p.loss}});
  }
  return a;
}

void write_tsv(const fs::path& path, const std::vector<tst::Point>& pts) {
  std::ofstream f(path);
  f << "# flops\theld_out_loss\ttokens_seen\tstep\n";
  for (const tst::Point& p : pts)
    f << p.flops << "\t" << p.eval_loss << "\t" << p.tokens_seen << "\t" << p.step << "\n";
}

}  // namespace

JobReport::JobReport(fs::path dir, const std::string& job, const std::string& kind)
    : dir_(std::move(dir)), summary_{{"job", job}, {"kind", kind}} {}

void JobReport::make_dir() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
}

json JobReport::add_rl_run(const std::string& label, const rl::RLRunResult& res, int workers) {
  json j = rl_result_json(res);
  make_dir();
  std::ofstream(dir_ / (label + ".json")) << j.dump(2) << "\n";
  summary_[label] = {
      {"trainerRanks", res.trainer_ranks},
      {"heldOutRewardBefore", res.held_out_before},
      {"heldOutRewardAfter", res.held_out_after},
      {"heldOutDifference", res.held_out_difference.mean},
      {"heldOutDifferenceCi95", {res.held_out_difference.lo, res.held_out_difference.hi}},
      {"totalSeconds", j["totalSeconds"]},
      {"reclaimedShare", j["reclaimedShare"]},
      {"gpuBusyRatio", j["gpuBusyRatio"]},
      {"gpuBusyFrom", j["gpuBusyFrom"]},
      {"promptsSkipped", res.prompts_skipped},
      {"promptsTruncated", res.prompts_truncated}};
  rl_labels_.push_back(label);
  if (!res.interrupted && have_gnuplot() && !res.steps.empty()) {
    std::string t = plot_timeline(dir_, label, res.steps.back(), workers);
    if (!t.empty()) summary_[label]["timeline"] = t;
  }
  return j;
}

void JobReport::add_failed_rl_run(const std::string& label, const rl::RLRunResult& res,
                                  const std::string& message) {
  json j = rl_result_json(res);
  j["failed"] = message;
  make_dir();
  std::ofstream(dir_ / (label + ".json")) << j.dump(2) << "\n";
  json rewards = json::array();
  for (const rl::StepReport& s : res.steps) rewards.push_back(s.reward_mean);
  summary_[label] = {{"failed", message},
                     {"stepsCompleted", res.steps.size()},
                     {"stepRewards", rewards},
                     {"totalSeconds", j["totalSeconds"]}};
  summary_["failed"] = label + " run: " + message;
}

fs::path JobReport::samples_path(const std::string& label) const {
  return dir_ / (label == "tlt" ? std::string(rl::kSamplesFile) : "samples-" + label + ".jsonl");
}

void JobReport::add_tst_run(const std::string& label, const std::vector<tst::Point>& points) {
  make_dir();
  write_tsv(dir_ / (label + ".tsv"), points);
  summary_[label] = points_json(points);
}

std::string JobReport::finish_rl(const metrics::RuntimeMetrics* metrics) {
  write_metrics(metrics);
  std::string steps_svg = have_gnuplot() ? plot_steps(dir_, rl_labels_) : "";
  summary_["steps"] = steps_svg;
  write_summary();
  return steps_svg;
}

std::string JobReport::finish_tst(bool with_baseline, bool baseline_only,
                                  const metrics::RuntimeMetrics* metrics) {
  make_dir();
  std::string picture = plot_loss(dir_, with_baseline);
  std::error_code ec;
  if (baseline_only)
    fs::copy_file(dir_ / "baseline.tsv", dir_ / "tst.tsv", fs::copy_options::overwrite_existing,
                  ec);
  summary_["picture"] = picture;
  write_metrics(metrics);
  write_summary();
  return picture;
}

void JobReport::write_summary() const {
  make_dir();
  std::ofstream(summary_path()) << summary_.dump(2) << "\n";
}

void JobReport::write_metrics(const metrics::RuntimeMetrics* metrics) const {
  make_dir();
  if (metrics) std::ofstream(dir_ / "metrics.prom") << metrics::render(*metrics);
}

json rl_result_json(const rl::RLRunResult& res) {
  json steps = json::array();
  for (const rl::StepReport& s : res.steps) steps.push_back(rl::to_json(s));
  double gen = 0, idle = 0, reclaimed = 0, total = 0;
  std::map<std::string, double> phases;  // generating worker-seconds per engine phase
  double busy = 0;  // tlt_gpu_busy_ratio, averaged over every worker of every step
  int64_t busy_n = 0;
  bool busy_device = false;
  for (const rl::StepReport& s : res.steps) {
    gen += s.generating_worker_seconds, idle += s.idle_worker_seconds;
    reclaimed += s.reclaimed_worker_seconds, total += s.step_seconds;
    for (const auto& [phase, seconds] : s.phase_seconds) phases[phase] += seconds;
    for (double b : rl::busy_ratios(s))
      if (b >= 0) busy += b, ++busy_n;
    busy_device = busy_device || std::string(rl::busy_source(s)) == "device";
  }
  const rl::PairedDifference& d = res.held_out_difference;
  json held_out = {{"problems", d.n},
                   {"samplesPerProblem", res.held_out_samples},
                   {"before", d.before},
                   {"after", d.after},
                   {"difference", d.mean},
                   {"ci95", {d.lo, d.hi}},
                   {"improved", d.improved()},
                   {"markedBefore", res.held_out_marked_before},
                   {"markedAfter", res.held_out_marked_after},
                   {"beforePerProblem", res.held_out_before_per_problem},
                   {"afterPerProblem", res.held_out_after_per_problem}};
  return {{"steps", steps},
          {"heldOutRewardBefore", res.held_out_before},
          {"heldOutRewardAfter", res.held_out_after},
          {"heldOut", held_out},
          {"interrupted", res.interrupted},
          {"trainerRanks", res.trainer_ranks},
          {"trainerPeakRssBytes", res.trainer_peak_rss_bytes},
          {"trainerOptimizerBytes", res.trainer_optimizer_bytes},
          {"warmStart", res.warm_start},
          {"promptsSkipped", res.prompts_skipped},
          {"promptsTruncated", res.prompts_truncated},
          {"totalSeconds", total},
          {"generatingWorkerSeconds", gen},
          {"generatingPhaseSeconds", phases},
          {"idleWorkerSeconds", idle},
          {"reclaimedWorkerSeconds", reclaimed},
          {"reclaimedShare", idle + reclaimed > 0 ? reclaimed / (idle + reclaimed) : 0.0},
          {"gpuBusyRatio", busy_n > 0 ? busy / double(busy_n) : 0.0},
          {"gpuBusyFrom", busy_device ? "device" : "clock"}};
}

std::string held_out_line(const rl::RLRunResult& res) {
  const rl::PairedDifference& d = res.held_out_difference;
  // A pretrained policy without a warm start is compared with the model as loaded.
  const char* from = res.warm_start.empty() ? "model as loaded" : "warm start";
  if (d.n == 0) {
    return "held-out reward " + api::format_number(res.held_out_before) + " (" + from + ") -> " +
           api::format_number(res.held_out_after) +
           " after RL; no interval: set spec.task.heldOut to 64 or more for a paired comparison";
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "held-out reward %.3f (%s) -> %.3f after RL: %+.3f, 95%% CI [%+.3f, "
                "%+.3f], paired over %lld problems x %lld samples (%s)",
                d.before, from, d.after, d.mean, d.lo, d.hi, static_cast<long long>(d.n),
                static_cast<long long>(res.held_out_samples),
                d.improved() ? "improved: the interval lies above 0"
                : d.hi < 0   ? "worse: the interval lies below 0"
                             : "no clear change: the interval contains 0");
  std::string line = buf;
  if (res.held_out_marked_before >= 0 && res.held_out_marked_after >= 0) {
    std::snprintf(buf, sizeof buf, "; answers marked %.0f%% -> %.0f%%",
                  100 * res.held_out_marked_before, 100 * res.held_out_marked_after);
    line += buf;
  }
  return line;
}

}  // namespace tlt::report
