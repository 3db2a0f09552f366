// A job's report directory, for both kinds of job (RLJob, TSTPretrainJob): what `tlt run` leaves
// behind besides checkpoints.
//
//   report.json        the summary: job, kind, the device the job computed on ("device": what
//                      `tlt run` printed after "device: "), and per run (label "tlt", "tst" or
//                      "baseline") its headline numbers; pictures' paths
//   <label>.json       RL: every step's report (rl/step_report.h's to_json) and the run's totals
//                      (generatingPhaseSeconds: worker-seconds per rollout engine phase)
//   <label>.tsv        TST: held-out loss against FLOPs
//   <label>-steps.tsv  RL: step time, reward and acceptance per step (for steps.svg)
//   timeline-<label>.svg, steps.svg, loss-vs-flops.svg   gnuplot pictures, when gnuplot is
//                      installed (scripts and data beside them)
//   metrics.prom       the last value of every metric, as Prometheus would have scraped it
//   samples.jsonl      RL: scored responses of the TLT run, one in spec.report.samples, written
//                      by the run as it goes (runtime/rl/samples.h); samples-<label>.jsonl for
//                      another run
//
// A run that fails still leaves report.json: "failed" (the run and its error) at the top, and
// under the run's label the error and the steps it completed (<label>.json holds them whole).
//
// Files are best effort, as before they moved here: a report that cannot be written never fails
// the job that made it (its numbers were printed as it ran).
// Thread safety: one thread.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/metrics/metrics.h"
#include "runtime/rl/plan.h"
#include "runtime/tst/run.h"

namespace tlt::report {

class JobReport {
 public:
  // Over `dir` (created, when missing, by the first write: a job that fails before its first run
  // ends leaves nothing behind); `job` and `kind` head the summary.
  JobReport(std::filesystem::path dir, const std::string& job, const std::string& kind);

  // The job's device, as runtime/device/device.h's Placement::description() says it
  // ("cuda:0 (NVIDIA H100 80GB HBM3)", "cpu (this build has no CUDA)").
  void set_device(const std::string& description) { summary_["device"] = description; }
  // An RL run: writes <label>.json, adds the run's headline numbers to the summary and draws its
  // last step's per-worker timeline. Returns what <label>.json holds.
  nlohmann::json add_rl_run(const std::string& label, const rl::RLRunResult& result, int workers);
  // An RL run that failed with `message` after the steps of `res` (those it completed; no
  // held-out figures): writes <label>.json with "failed", and puts the error, the steps
  // completed and their mean rewards in the summary. write_summary() writes it out.
  void add_failed_rl_run(const std::string& label, const rl::RLRunResult& res,
                         const std::string& message);
  // A TST run: writes <label>.tsv and adds its points to the summary.
  void add_tst_run(const std::string& label, const std::vector<tst::Point>& points);

  // Ends an RL report: steps.svg over the runs added, metrics.prom (when `metrics` is given),
  // report.json. Returns the picture's path, or "" without gnuplot.
  std::string finish_rl(const metrics::RuntimeMetrics* metrics);
  // Ends a TST report: loss-vs-flops.svg (the baseline's curve too when `with_baseline`; a
  // baseline-only run's also stands as tst.tsv), metrics.prom, report.json. Returns the
  // picture's path, or "".
  std::string finish_tst(bool with_baseline, bool baseline_only,
                         const metrics::RuntimeMetrics* metrics);
  // Writes report.json as it stands (a run stopped by a signal).
  void write_summary() const;

  std::filesystem::path summary_path() const { return dir_ / "report.json"; }
  // Where RL run `label` records its scored responses (RLRunPlan::samples_path).
  std::filesystem::path samples_path(const std::string& label) const;

 private:
  void write_metrics(const metrics::RuntimeMetrics* metrics) const;
  void make_dir() const;  // dir_, when missing

  std::filesystem::path dir_;
  nlohmann::json summary_;
  std::vector<std::string> rl_labels_;  // runs added, in order
};

// What <label>.json holds for an RL run: its steps and totals.
nlohmann::json rl_result_json(const rl::RLRunResult& result);

// "held-out reward 0.078 (warm start) -> 0.112 after RL: +0.034, 95% CI [+0.012, +0.056], paired
// over 256 problems x 4 samples (improved: the interval lies above 0); answers marked 48% -> 70%"
// (the last clause when both shares of responses that mark a final answer are known).
std::string held_out_line(const rl::RLRunResult& result);

}  // namespace tlt::report
