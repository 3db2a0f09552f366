#include "runtime/cli/tst_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "api/fnv.h"
#include "runtime/cli/metrics_endpoint.h"
#include "runtime/data/token_file.h"
#include "runtime/tst/run.h"

namespace tlt::cli {
namespace {
namespace fs = std::filesystem;

// Cache key of a corpus + tokenizer + split: the same inputs give the same files.
std::string corpus_key(const api::TSTPretrainJobSpec& spec) {
  std::string key = spec.data.corpus;
  if (spec.data.corpus == "files") {
    uint64_t h = fnv1a64("");
    for (const std::string& p : spec.data.paths) h = fnv1a64(p, h);
    key += "-" + std::to_string(h % 1000000007ull);
  }
  char frac[32];
  std::snprintf(frac, sizeof frac, "%g", spec.data.held_out_fraction);
  return key + "-bpe" + std::to_string(spec.data.tokenizer.vocab_size) + "-h" + frac;
}

// The tokenized corpus, made by the tlt-data binary beside this one when not cached.
StatusOr<data::TokenizedCorpus> tokenized_corpus(const api::TSTPretrainJobSpec& spec,
                                                 std::ostream& out) {
  std::string key = corpus_key(spec);
  std::string tokens = data::cache_root() + "/corpora/" + key + ".tokens";
  std::string tokenizer = spec.data.tokenizer.path.empty()
                              ? data::cache_root() + "/tokenizers/" + key + ".model"
                              : spec.data.tokenizer.path;
  std::error_code ec;
  if (!fs::exists(tokens, ec)) {
    fs::create_directories(fs::path(tokens).parent_path(), ec);
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    fs::path tool = self.parent_path() / "tlt-data";
    std::string cmd = "'" + tool.string() + "' tokenize --corpus " + spec.data.corpus +
                      " --vocab " + std::to_string(spec.data.tokenizer.vocab_size) +
                      " --held-out " + std::to_string(spec.data.held_out_fraction) +
                      " --tokenizer '" + tokenizer + "' --out '" + tokens + "'";
    for (const std::string& p : spec.data.paths) cmd += " --paths '" + p + "'";
    out << "tlt run: tokenizing the corpus once (cached in " << tokens << ")\n" << std::flush;
    if (std::system(cmd.c_str()) != 0) {
      return Status::Unavailable("tokenizing failed: " + cmd);
    }
  }
  return data::read_token_file(tokens);
}

tst::RunPlan plan_from(const api::TSTPretrainJobSpec& s, int vocab) {
  tst::RunPlan p;
  p.preset = s.model.effective_preset();
  p.vocab = vocab;
  p.steps = s.training.steps, p.warmup = s.training.schedule.warmup_steps;
  p.decay_fraction = s.training.schedule.decay_fraction;
  p.learning_rate = s.training.learning_rate, p.weight_decay = s.training.weight_decay;
  p.grad_clip = s.training.grad_clip;
  p.superposition = s.superposition.enabled, p.bag = s.superposition.bag_size;
  p.ratio = s.superposition.ratio, p.weighting = s.superposition.weighting;
  p.batch = s.training.batch_size, p.positions = s.training.seq_len;
  p.eval_every = s.training.eval_every_steps, p.eval_batches = s.training.eval_batches;
  p.seed = uint64_t(s.training.seed);
  p.checkpoint_every = s.checkpoint.every_steps;
  return p;
}

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

nlohmann::json points_json(const std::vector<tst::Point>& pts) {
  nlohmann::json a = nlohmann::json::array();
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

// Draws loss against FLOPs with gnuplot when it is installed; returns the picture's path or "".
std::string plot(const fs::path& dir, bool with_baseline) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return "";
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
  std::string cmd = "gnuplot '" + script.string() + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0 ? svg.string() : "";
}

}  // namespace

int run_tst_job(const api::TSTPretrainJob& job, const TSTRunFlags& flags, std::ostream& out,
                std::ostream& err) {
  const api::TSTPretrainJobSpec& spec = job.spec;
  StatusOr<data::TokenizedCorpus> corpus = tokenized_corpus(spec, out);
  if (!corpus.ok()) {
    err << "tlt run: " << corpus.status().message() << "\n";
    return 1;
  }
  std::vector<std::vector<int32_t>> train_ids, held_ids;
  int64_t train_tokens = 0;
  for (data::TokenizedDocument& d : corpus->docs) {
    bool held = data::held_out_by_name(d.name, spec.data.held_out_fraction);
    if (!held) train_tokens += int64_t(d.ids.size());
    (held ? held_ids : train_ids).push_back(std::move(d.ids));
  }
  if (held_ids.empty()) {
    err << "tlt run: spec.data.heldOutFraction " << spec.data.held_out_fraction
        << " holds out no document of " << corpus->docs.size() << "; raise it\n";
    return 1;
  }
  out << "tlt run: corpus " << spec.data.corpus << ": " << train_ids.size() << " training ("
      << train_tokens << " tokens) and " << held_ids.size() << " held-out documents, vocab "
      << corpus->vocab << "\n";
  std::string base_dir =
      spec.checkpoint.path.empty() ? ".tlt/" + job.metadata.name : spec.checkpoint.path;
  fs::path report =
      flags.report_dir.empty() ? fs::path(base_dir) / "report" : fs::path(flags.report_dir);
  std::error_code ec;
  fs::create_directories(report, ec);
  nlohmann::json summary = {{"job", job.metadata.name}, {"kind", job.kind}};
  MetricsEndpoint endpoint = start_metrics(job.metadata.name, spec.metrics.port, out, err);
  metrics::RuntimeMetrics* m = endpoint.metrics.get();
  auto run_one = [&](bool superposition,
                     const std::string& label) -> StatusOr<std::vector<tst::Point>> {
    tst::RunPlan plan = plan_from(spec, corpus->vocab);
    plan.superposition = superposition && spec.superposition.enabled;
    plan.resume = flags.resume;
    if (!spec.checkpoint.path.empty()) plan.checkpoint_dir = spec.checkpoint.path + "/" + label;
    Progress progress(out, label, plan.steps);
    int64_t tokens_before = 0;  // tokens_seen is cumulative within one run
    auto on_point = [&](const tst::Point& p) {
      progress(p);
      if (!m) return;
      (void)m->set_tst_phase(p.phase);
      m->set_tst_loss(p.loss);
      if (p.tokens_seen > tokens_before)
        m->add_tokens_seen(uint64_t(p.tokens_seen - tokens_before));
      tokens_before = p.tokens_seen;
    };
    return tst::run_pretraining(plan, train_ids, held_ids, on_point);
  };
  std::vector<std::pair<std::string, bool>> runs;
  if (!flags.baseline) runs.push_back({"tst", true});
  if (flags.baseline || flags.compare) runs.push_back({"baseline", false});
  for (const auto& [label, superposition] : runs) {
    StatusOr<std::vector<tst::Point>> pts = run_one(superposition, label);
    if (!pts.ok()) {
      err << "tlt run: " << label << ": " << pts.status().message() << "\n";
      return 1;
    }
    write_tsv(report / (label + ".tsv"), *pts);
    summary[label] = points_json(*pts);
    out << label << ": final held-out loss " << pts->back().eval_loss << " after "
        << pts->back().flops << " FLOPs and " << pts->back().tokens_seen << " tokens\n";
  }
  std::string picture = plot(report, runs.size() == 2 || flags.baseline);
  if (flags.baseline)
    fs::copy_file(report / "baseline.tsv", report / "tst.tsv", fs::copy_options::overwrite_existing,
                  ec);
  summary["picture"] = picture;
  if (m) std::ofstream(report / "metrics.prom") << metrics::render(*m);
  std::ofstream(report / "report.json") << summary.dump(2) << "\n";
  out << "report: " << (report / "report.json").string()
      << (picture.empty() ? " (no picture: install gnuplot-nox)" : ", " + picture) << "\n";
  return 0;
}

}  // namespace tlt::cli
