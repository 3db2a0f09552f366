// bench_trainer_dp: the GRPO policy update of SmolLM2-135M (or --model's) on 1 trainer rank and on
// 2 (runtime/rl/policy_trainer.h: data parallel over Gloo, AdamW state sharded, ZeRO-1), side by
// side in one run. Each rank is a process of this binary (so its peak RSS is its own) with
// cores / ranks compute threads; they meet at a file store. The batch is synthetic: --groups
// GRPO groups of --group-size samples, a --prompt-token prompt each, responses of 16 to
// --max-response tokens, random tokens and advantages of a fixed seed. Printed per run and rank:
// the time of each update (the first allocates AdamW's state), peak RSS and the optimizer
// state's bytes; then the ratios 2 ranks / 1 rank. Like `tlt`, it runs with GOMP_SPINCOUNT=300
// and keeps freed memory (runtime/torch_env.h).
// Usage: bench_trainer_dp [--model PATH] [--updates 2] [--groups 2] [--group-size 4]
//                         [--prompt-tokens 64] [--max-response 96]
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/shapes.h"
#include "runtime/clock.h"
#include "runtime/cpu_info.h"
#include "runtime/model/model_source.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/sequences.h"
#include "runtime/torch_env.h"
#include "runtime/tst/group.h"

namespace {
namespace fs = std::filesystem;
using namespace tlt;
using nlohmann::json;

struct Options {
  std::string model;  // "": SmolLM2-135M's shape with random weights
  int updates = 2, groups = 2, group_size = 4, prompt_tokens = 64, max_response = 96;
  // A rank process (set by the orchestrator).
  int rank = -1, world = 1;
  std::string store, out;
};

void check(const Status& s, const std::string& what) {
  bench::check_or_exit(s, "bench_trainer_dp", what);
}

// The model at o.model (rank 0's weights; the other ranks take them from it), or SmolLM2's
// shape with weights of a fixed seed.
model::Transformer load(const Options& o) {
  if (o.model.empty()) {
    torch::manual_seed(1);
    return model::Transformer(bench::smollm2_135m_shape());
  }
  StatusOr<model::ModelSource> src = model::resolve_model_source(o.model, "auto");
  check(src.status(), o.model);
  StatusOr<model::SourcedModel> m = model::load_model(*src);
  check(m.status(), o.model);
  return m->model;
}

// The synthetic step: B = groups * group_size rows, advantages (B,).
std::pair<rl::SequenceBatch, torch::Tensor> batch(const Options& o, int64_t vocab) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int g = 0; g < o.groups; ++g) {
    std::vector<int64_t> prompt;
    for (int i = 0; i < o.prompt_tokens; ++i) prompt.push_back(int64_t(rng() % uint64_t(vocab)));
    for (int s = 0; s < o.group_size; ++s) {
      std::vector<int64_t> r;
      for (int64_t i = 0, n = 16 + int64_t(rng() % uint64_t(o.max_response - 15)); i < n; ++i)
        r.push_back(int64_t(rng() % uint64_t(vocab)));
      prompts.push_back(prompt), responses.push_back(r);
    }
  }
  torch::manual_seed(3);
  return {rl::make_batch(prompts, responses), torch::randn({int64_t(prompts.size())})};
}

// One rank's process: rank 0 writes the run's figures to o.out.
int run_rank(const Options& o) {
  runtime::ComputeInfo info = runtime::compute_info();
  runtime::configure_threads(std::max(1, info.cores / o.world));
  model::Transformer policy = load(o);  // ranks > 0: the architecture (then rank 0's weights)
  model::Transformer reference = o.rank == 0 ? load(o) : model::Transformer(policy->config());
  for (auto& p : reference->parameters()) p.set_requires_grad(false);
  reference->eval();
  std::unique_ptr<tst::DataParallelGroup> group;
  if (o.world > 1) {
    tst::GroupOptions g;
    g.rank = o.rank, g.world = o.world, g.store_file = o.store, g.timeout_s = 600;
    StatusOr<std::unique_ptr<tst::DataParallelGroup>> opened = tst::DataParallelGroup::open(g);
    check(opened.status(), "open the group");
    group = std::move(*opened);
    check(group->join(), "join the group");
  }
  rl::GrpoOptions go;
  go.learning_rate = 1e-5, go.minibatches = 1, go.kl_coef = 0.01;
  go.group_size = o.group_size;
  rl::PolicyTrainer trainer(policy, reference, go, group.get());
  if (o.rank > 0) {
    check(trainer.serve(600), "rank " + std::to_string(o.rank));
    return 0;
  }
  check(trainer.synchronise(), "synchronise");
  auto [b, adv] = batch(o, policy->config().vocab);
  json runs = json::array();
  for (int u = 0; u < o.updates; ++u) {
    const double t = runtime::now_s();
    rl::UpdateStats st = trainer.update(b, adv);
    check(st.status, "update");
    runs.push_back({{"seconds", runtime::now_s() - t},
                    {"loss", st.loss},
                    {"peakRss", st.rank_peak_rss_bytes},
                    {"optimizerBytes", st.rank_optimizer_bytes}});
  }
  check(trainer.finish(), "finish");
  std::ofstream(o.out) << json{{"world", o.world},
                               {"rows", b.tokens.size(0)},
                               {"positions", b.tokens.numel()},
                               {"updates", runs}}
                              .dump()
                       << "\n";
  return 0;
}

// Runs world ranks of this binary and returns rank 0's figures.
json run_world(const Options& o, int world, const std::string& dir) {
  const std::string store = dir + "/store-" + std::to_string(world),
                    out = dir + "/out-" + std::to_string(world) + ".json";
  std::error_code ec;
  fs::remove(store, ec);
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args = {self,
                                     "--rank",
                                     std::to_string(r),
                                     "--world",
                                     std::to_string(world),
                                     "--store",
                                     store,
                                     "--out",
                                     out,
                                     "--updates",
                                     std::to_string(o.updates),
                                     "--groups",
                                     std::to_string(o.groups),
                                     "--group-size",
                                     std::to_string(o.group_size),
                                     "--prompt-tokens",
                                     std::to_string(o.prompt_tokens),
                                     "--max-response",
                                     std::to_string(o.max_response)};
    if (!o.model.empty()) args.insert(args.end(), {"--model", o.model});
    pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(self.c_str(), argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::cerr << "bench_trainer_dp: a rank of the " << world << "-rank run failed\n";
      std::exit(1);
    }
  }
  return json::parse(std::ifstream(out));
}

double mib(int64_t bytes) {
  return double(bytes) / double(1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  // As `tlt` runs: a short OpenMP spin (re-executes once) and freed memory kept (torch_env.h).
  runtime::limit_openmp_spinning(argv);
  runtime::keep_freed_memory();
  Options o;
  CLI::App app{"bench_trainer_dp: the GRPO update on 1 and on 2 trainer ranks (ZeRO-1)"};
  app.add_option("--model", o.model, "a model spec.model.path accepts (default: SmolLM2's shape)");
  app.add_option("--updates", o.updates, "updates per run");
  app.add_option("--groups", o.groups, "GRPO groups in the step");
  app.add_option("--group-size", o.group_size, "samples per group");
  app.add_option("--prompt-tokens", o.prompt_tokens, "tokens per prompt");
  app.add_option("--max-response", o.max_response, "longest response (>= 16)");
  app.add_option("--rank", o.rank)->group("");
  app.add_option("--world", o.world)->group("");
  app.add_option("--store", o.store)->group("");
  app.add_option("--out", o.out)->group("");
  CLI11_PARSE(app, argc, argv);
  if (o.rank >= 0) return run_rank(o);
  o.max_response = std::max(o.max_response, 17);
  const std::string dir =
      fs::temp_directory_path() / ("bench_trainer_dp_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::printf("cpu %s\n", runtime::describe(runtime::cpu_info()).c_str());
  std::printf("model %s; %d groups x %d samples, prompts %d tokens, responses 16..%d; %d updates\n",
              o.model.empty() ? "SmolLM2-135M shape (random weights)" : o.model.c_str(), o.groups,
              o.group_size, o.prompt_tokens, o.max_response, o.updates);
  json one = run_world(o, 1, dir), two = run_world(o, 2, dir);
  std::printf("%-6s %-5s %-10s %-14s %-14s\n", "ranks", "rank", "update_s", "peak_rss_MiB",
              "optimizer_MiB");
  for (const json& run : {one, two}) {
    const json& last = run["updates"].back();
    for (size_t r = 0; r < last["peakRss"].size(); ++r) {
      std::string times;
      for (const json& u : run["updates"]) {
        char t[32];
        std::snprintf(t, sizeof t, "%s%.2f", times.empty() ? "" : ",", u["seconds"].get<double>());
        times += t;
      }
      std::printf("%-6d %-5zu %-10s %-14.1f %-14.1f\n", run["world"].get<int>(), r,
                  r == 0 ? times.c_str() : "", mib(last["peakRss"][r].get<int64_t>()),
                  mib(last["optimizerBytes"][r].get<int64_t>()));
    }
  }
  const json &a = one["updates"].back(), &b = two["updates"].back();
  const double rss1 = double(a["peakRss"][0].get<int64_t>());
  const double opt1 = double(a["optimizerBytes"][0].get<int64_t>());
  std::printf(
      "ratios (2 ranks / 1 rank): last update time %.2f; peak RSS rank 0 %.2f, rank 1 %.2f; "
      "optimizer bytes rank 0 %.3f, rank 1 %.3f; loss %.6g vs %.6g\n",
      b["seconds"].get<double>() / a["seconds"].get<double>(),
      double(b["peakRss"][0].get<int64_t>()) / rss1, double(b["peakRss"][1].get<int64_t>()) / rss1,
      double(b["optimizerBytes"][0].get<int64_t>()) / opt1,
      double(b["optimizerBytes"][1].get<int64_t>()) / opt1, a["loss"].get<double>(),
      b["loss"].get<double>());
  fs::remove_all(dir);
  return 0;
}
