#include "runtime/cli/tst_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/encode.h"
#include "api/fnv.h"
#include "api/labels.h"
#include "runtime/cli/metrics_endpoint.h"
#include "runtime/data/token_file.h"
#include "runtime/model/model_source.h"
#include "runtime/report/job_report.h"
#include "runtime/torch_env.h"
#include "runtime/tst/group.h"
#include "runtime/tst/run.h"

extern char** environ;

namespace tlt::cli {
namespace {
namespace fs = std::filesystem;

// An identity of the file a Hugging Face tokenizer is read from (path, size, mtime).
std::string file_identity(const std::string& source) {
  std::error_code ec;
  fs::path file = source;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  if (file.filename() == "config.json") file = file.parent_path() / "tokenizer.json";
  fs::path canonical = fs::weakly_canonical(file, ec);
  auto size = fs::file_size(file, ec);
  auto mtime = fs::last_write_time(file, ec).time_since_epoch().count();
  return canonical.string() + ":" + std::to_string(size) + ":" + std::to_string(mtime);
}

// Cache key of a corpus + tokenizer + split: the same inputs give the same files.
std::string corpus_key(const api::TSTPretrainJobSpec& spec, const DataTokenizer& tok) {
  std::string key = spec.data.corpus;
  if (spec.data.corpus == "files") {
    uint64_t h = fnv1a64("");
    for (const std::string& p : spec.data.paths) h = fnv1a64(p, h);
    key += "-" + std::to_string(h % 1000000007ull);
  }
  char frac[32];
  std::snprintf(frac, sizeof frac, "%g", spec.data.held_out_fraction);
  if (tok.hf) return key + "-hf" + std::to_string(fnv1a64(file_identity(tok.path)) % 1000000007ull);
  return key + "-bpe" + std::to_string(spec.data.tokenizer.vocab_size) + "-h" + frac;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

StatusOr<DataTokenizer> data_tokenizer(const api::TSTPretrainJobSpec& spec) {
  const std::string& given = spec.data.tokenizer.path;
  if (!given.empty()) return DataTokenizer{given, ends_with(given, ".json")};
  if (spec.model.path.empty()) return DataTokenizer{};
  StatusOr<model::ModelSource> source =
      model::resolve_model_source(spec.model.path, spec.model.format);
  if (!source.ok()) return source.status().with_context("spec.model.path");
  StatusOr<std::string> own = model::model_tokenizer_source(*source);
  if (!own.ok()) return own.status().with_context("spec.model.path");
  if (own->empty() && source->kind == model::SourceKind::kGguf) {
    return Status::InvalidArgument("spec.model.path: " + spec.model.path +
                                   " carries no tokenizer (no tokenizer.ggml.* metadata); set "
                                   "spec.data.tokenizer.path to the model's tokenizer.json");
  }
  return DataTokenizer{*own, !own->empty()};
}

StatusOr<std::string> tokenized_corpus_file(const api::TSTPretrainJobSpec& spec,
                                            std::ostream& out) {
  StatusOr<DataTokenizer> tok = data_tokenizer(spec);
  if (!tok.ok()) return tok.status();
  std::string key = corpus_key(spec, *tok);
  std::string tokens = data::cache_root() + "/corpora/" + key + ".tokens";
  std::string tokenizer =
      tok->path.empty() ? data::cache_root() + "/tokenizers/" + key + ".model" : tok->path;
  std::error_code ec;
  if (!fs::exists(tokens, ec)) {
    fs::create_directories(fs::path(tokens).parent_path(), ec);
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    fs::path tool = self.parent_path() / "tlt-data";
    std::string cmd = "'" + tool.string() + "' tokenize --corpus " + spec.data.corpus +
                      " --vocab " + std::to_string(spec.data.tokenizer.vocab_size) +
                      " --held-out " + std::to_string(spec.data.held_out_fraction) +
                      (tok->hf ? " --hf-tokenizer '" : " --tokenizer '") + tokenizer + "' --out '" +
                      tokens + "'";
    for (const std::string& p : spec.data.paths) cmd += " --paths '" + p + "'";
    out << "tlt: tokenizing the corpus once (cached in " << tokens << ")\n" << std::flush;
    if (std::system(cmd.c_str()) != 0) {
      return Status::Unavailable("tokenizing failed: " + cmd);
    }
  }
  return tokens;
}

namespace {

// The tokenized corpus (tokenized_corpus_file), read.
StatusOr<data::TokenizedCorpus> tokenized_corpus(const api::TSTPretrainJobSpec& spec,
                                                 std::ostream& out) {
  StatusOr<std::string> file = tokenized_corpus_file(spec, out);
  if (!file.ok()) return file.status();
  return data::read_token_file(*file);
}

tst::RunPlan plan_from(const api::TSTPretrainJobSpec& s, int vocab) {
  tst::RunPlan p;
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

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// "tst", "baseline" or "tst,baseline": the runs of a job, for its worker processes.
std::string runs_of(const TSTRunFlags& f) {
  return f.baseline ? "baseline" : f.compare ? "tst,baseline" : "tst";
}

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

// Ranks 1..R-1 of a local data-parallel run: `tlt run-role` processes of this binary, stdout to
// dir/worker-<r>.log, stderr shared with this process. They die with this process
// (PR_SET_PDEATHSIG); the destructor ends the ones still running.
class LocalWorkers {
 public:
  LocalWorkers() = default;
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;
  ~LocalWorkers() { stop(); }

  // Starts ranks 1..world-1 of the job in job_file, meeting at 127.0.0.1:port.
  Status start(const fs::path& job_file, const fs::path& dir, int world, int port, int threads,
               const TSTRunFlags& flags) {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return Status::Unavailable("cannot find this binary: " + ec.message());
    for (int r = 1; r < world; ++r) {
      std::vector<std::string> env;
      for (char** e = environ; *e; ++e) {
        std::string kv = *e;
        if (kv.rfind("TLT_", 0) != 0 && kv.rfind("OMP_NUM_THREADS=", 0) != 0 &&
            kv.rfind("BLIS_NUM_THREADS=", 0) != 0)
          env.push_back(kv);
      }
      for (std::string kv :
           {"TLT_JOB_FILE=" + job_file.string(), std::string("TLT_ROLE=worker"),
            "TLT_INDEX=" + std::to_string(r), std::string("TLT_RENDEZVOUS_ADDRESS=127.0.0.1"),
            "TLT_RENDEZVOUS_PORT=" + std::to_string(port), "TLT_TST_RUNS=" + runs_of(flags),
            std::string("TLT_RESUME=") + (flags.resume ? "1" : "0"),
            "TLT_THREADS=" + std::to_string(threads), "OMP_NUM_THREADS=" + std::to_string(threads),
            "BLIS_NUM_THREADS=" + std::to_string(threads)})
        env.push_back(kv);
      std::string log = (dir / ("worker-" + std::to_string(r) + ".log")).string();
      TLT_RETURN_IF_ERROR(spawn(self.string(), env, log));
    }
    return Status::Ok();
  }

  // Waits up to timeout_s for every worker to exit; returns "" when all exited 0, else one line
  // per worker that failed or is still running (those are then ended).
  std::string wait(int timeout_s) {
    std::string failed;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (pids_[i] <= 0) continue;
      int status = 0;
      pid_t got = 0;
      while ((got = waitpid(pids_[i], &status, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::string who = "data-parallel worker " + std::to_string(i + 1) + " (pid " +
                        std::to_string(pids_[i]) + ") ";
      if (got == 0) {
        failed += who + "did not finish in " + std::to_string(timeout_s) + " s\n";
        continue;
      }
      pids_[i] = -1;
      if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        failed += who + (got < 0 ? "was lost" : exit_text(status)) + "\n";
    }
    stop();
    return failed;
  }

  // Ends the workers still running: SIGTERM, then SIGKILL after 5 s.
  void stop() {
    for (pid_t p : pids_)
      if (p > 0) kill(p, SIGTERM);
    for (pid_t& p : pids_) {
      if (p <= 0) continue;
      for (int i = 0; i < 250 && waitpid(p, nullptr, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (kill(p, 0) == 0) kill(p, SIGKILL), waitpid(p, nullptr, 0);
      p = -1;
    }
  }

 private:
  Status spawn(const std::string& exe, std::vector<std::string>& env, const std::string& log) {
    std::vector<char*> envp;
    for (std::string& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    char arg0[] = "tlt", arg1[] = "run-role";
    char* argv[] = {arg0, arg1, nullptr};
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return Status::Unavailable("cannot fork a data-parallel worker");
    if (pid == 0) {  // only async-signal-safe calls until execve
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) dup2(fd, STDOUT_FILENO);
      execve(exe.c_str(), argv, envp.data());
      _exit(127);
    }
    pids_.push_back(pid);
    return Status::Ok();
  }

  std::vector<pid_t> pids_;  // rank r at r - 1; -1 once reaped
};

// Compute threads of each rank when `world` ranks share this machine.
int threads_per_rank(int world) {
  runtime::ComputeInfo info = runtime::compute_info();
  return std::max(1, std::min(info.intra_op_threads, info.cores / world));
}

// Opens and joins the data-parallel group of this rank; the local run (rank 0 without a
// rendezvous host) first starts the other ranks.
StatusOr<std::unique_ptr<tst::DataParallelGroup>> join_group(const api::TSTPretrainJob& job,
                                                             const TSTRunFlags& flags,
                                                             const fs::path& base_dir,
                                                             LocalWorkers& workers) {
  tst::GroupOptions o;
  o.rank = flags.rank, o.world = job.spec.workers.replicas;
  bool local = flags.rendezvous_host.empty();
  o.host = local ? "127.0.0.1" : flags.rendezvous_host;
  o.port = local ? 0 : flags.rendezvous_port;
  o.loopback = o.host == "127.0.0.1" || o.host == "localhost";
  o.rendezvous_timeout_s = local || o.loopback ? 120 : 600;
  int timeout_s = std::atoi(env_or("TLT_COLLECTIVE_TIMEOUT_S", "300").c_str());
  o.timeout_s = timeout_s > 0 ? timeout_s : 300;
  StatusOr<std::unique_ptr<tst::DataParallelGroup>> group = tst::DataParallelGroup::open(o);
  if (!group.ok()) return group.status();
  if (local && flags.rank == 0) {
    int threads = threads_per_rank(o.world);
    runtime::configure_threads(threads);
    fs::path dir = base_dir / "workers", job_file = dir / "job.json";
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::ofstream(job_file) << api::to_json(job).dump(2) << "\n";
    TLT_RETURN_IF_ERROR(workers.start(job_file, dir, o.world, (*group)->port(), threads, flags));
  }
  TLT_RETURN_IF_ERROR((*group)->join());
  return group;
}

struct Documents {
  std::vector<std::vector<int32_t>> train, held_out;
  int vocab = 0;
};

// The job's tokenized training and held-out documents.
StatusOr<Documents> documents(const api::TSTPretrainJobSpec& spec, std::ostream& out) {
  StatusOr<data::TokenizedCorpus> corpus = tokenized_corpus(spec, out);
  if (!corpus.ok()) return corpus.status();
  Documents d;
  d.vocab = corpus->vocab;
  int64_t train_tokens = 0;
  for (data::TokenizedDocument& doc : corpus->docs) {
    bool held = data::held_out_by_name(doc.name, spec.data.held_out_fraction);
    if (!held) train_tokens += int64_t(doc.ids.size());
    (held ? d.held_out : d.train).push_back(std::move(doc.ids));
  }
  if (d.held_out.empty()) {
    std::ostringstream m;
    m << "spec.data.heldOutFraction " << spec.data.held_out_fraction << " holds out no document of "
      << corpus->docs.size() << "; raise it";
    return Status::InvalidArgument(m.str());
  }
  out << "tlt run: corpus " << spec.data.corpus << ": " << d.train.size() << " training ("
      << train_tokens << " tokens) and " << d.held_out.size() << " held-out documents, vocab "
      << d.vocab << "\n";
  return d;
}

std::string base_dir_of(const api::TSTPretrainJob& job) {
  return job.spec.checkpoint.path.empty() ? ".tlt/" + job.metadata.name : job.spec.checkpoint.path;
}

// The job's runs (TST, baseline or both) as one rank; rank 0 prints progress and writes the
// report, metrics and checkpoints. Returns the exit code.
int run_all(const api::TSTPretrainJob& job, const TSTRunFlags& flags, const Documents& docs,
            tst::Collective* group, std::ostream& out, std::ostream& err) {
  const api::TSTPretrainJobSpec& spec = job.spec;
  bool rank0 = flags.rank == 0;
  std::optional<report::JobReport> rep;
  if (rank0) {
    rep.emplace(flags.report_dir.empty() ? fs::path(base_dir_of(job)) / "report"
                                         : fs::path(flags.report_dir),
                job.metadata.name, job.kind);
  }
  MetricsEndpoint endpoint;
  if (rank0) endpoint = start_metrics(job.metadata.name, spec.metrics.port, out, err);
  metrics::RuntimeMetrics* m = endpoint.metrics.get();
  auto run_one = [&](bool superposition,
                     const std::string& label) -> StatusOr<std::vector<tst::Point>> {
    tst::RunPlan plan = plan_from(spec, docs.vocab);
    plan.superposition = superposition && spec.superposition.enabled;
    plan.resume = flags.resume;
    if (!spec.checkpoint.path.empty()) plan.checkpoint_dir = spec.checkpoint.path + "/" + label;
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
  StatusOr<Documents> docs = documents(job.spec, log);
  if (!docs.ok()) {
    err << "tlt run: " << docs.status().message() << "\n";
    return 1;
  }
  LocalWorkers workers;  // the other ranks, when this is a local data-parallel run
  std::unique_ptr<tst::DataParallelGroup> group;
  if (world > 1) {
    StatusOr<std::unique_ptr<tst::DataParallelGroup>> g =
        join_group(job, flags, base_dir_of(job), workers);
    if (!g.ok()) {
      err << "tlt run: data-parallel rank " << flags.rank << " of " << world << ": "
          << g.status().message() << "\n"
          << workers.wait(5);
      return 1;
    }
    group = std::move(*g);
    log << "tlt run: data parallel over " << world << " ranks"
        << (flags.rendezvous_host.empty() ? " (worker processes on this machine)" : "") << "\n";
    if (flags.rank > 0)
      out << "tlt run-role: TSTPretrainJob " << job.metadata.name << " worker " << flags.rank
          << " of " << world << " joined\n";
  }
  int code = run_all(job, flags, *docs, group ? group->collective() : nullptr, log, err);
  group.reset();  // the workers' pending collectives fail now rather than at their timeout
  std::string failed = workers.wait(code == 0 ? 120 : 10);
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
