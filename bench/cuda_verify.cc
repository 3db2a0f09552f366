// bench_cuda_verify: what speculative verification can win on a GPU, and what CUDA graphs add.
// GPU flavour only (TLT_GPU); built by scripts/gpu-check.sh and run on the device machine.
//
// A target of SmolLM2-135M's shape (llama: C 576, 30 layers, 9 heads, 3 KV heads, F 1536,
// V 49152; random weights, since timing does not depend on them), each of B requests with a
// committed prefix of --prefix tokens. For every batch B and verified-token count N it times one
// verify forward (N tokens per row, a chain tree) two ways, side by side in one run:
//   eager  TransformerImpl::forward with the cache, as the engine runs without graphs;
//   graph  rollout::CudaGraphPool::forward, a captured graph replayed (as the engine's verify).
// and prints, per dtype:
//   ceiling(B, N) = N x T(B, 1) / T(B, N): the most a verify of N tokens can win over N plain
//                   decode steps if every draft were accepted (the CPU bench prints the same for
//                   the CPU, bench/rollout.sh --ceiling-only);
//   graph speedup = T_eager / T_graph for the same (B, N).
// Each time is the median of --reps timed forwards after 3 warm-ups, with the device synchronised
// around each.
//
// --engine adds the rollout engine end to end on the same target (float32, or the one dtype
// --dtype names; untied LM head, random weights, so acceptance is this model's, not a trained
// one's): B requests of 32 prompt tokens and --new tokens each at each of --temperatures (default
// greedy), plain decoding eager and with graphs, the n-gram arm, an EAGLE chain with an untrained
// drafter and the adaptive bandit over both, each timed on its second generate() (the first
// captures the graphs). With graphs the drafter's forwards replay too (draft_graph.h): the table
// counts its replays and its eager fallbacks.
// Shapes: B rows, N tokens per row, V vocab.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/shapes.h"
#include "runtime/model/drafter.h"
#include "runtime/model/transformer.h"
#include "runtime/rollout/cuda_graph_pool.h"
#include "runtime/rollout/engine.h"

namespace {

using tlt::model::Transformer;

struct Options {
  std::vector<int64_t> batches{1, 4, 16, 64};
  std::vector<int64_t> tokens{1, 4, 8, 16};
  int64_t prefix = 256;
  int reps = 20;
  std::vector<torch::ScalarType> dtypes{torch::kFloat32, torch::kBFloat16};
  bool engine = false;
  int32_t new_tokens = 128;
  torch::ScalarType engine_dtype = torch::kFloat32;  // --dtype naming one dtype sets it too
  std::vector<double> temperatures{0.0};
};

template <class F>
double median_ms(int reps, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  torch::cuda::synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    torch::cuda::synchronize();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

struct Timing {
  double eager_ms, graph_ms;
};

// Times one (B, N) verify forward both ways on a cache whose B slots hold `prefix` tokens each.
Timing time_verify(Transformer& m, int64_t b, int64_t n, const Options& o, int64_t max_batch) {
  torch::Device dev = m->embed->weight.device();
  auto i64 = torch::dtype(torch::kInt64).device(dev);
  auto cache = m->make_cache(max_batch, o.prefix + 64);
  for (int64_t i = 0; i < b; ++i) cache->add_slot();
  torch::Tensor prompt = torch::randint(m->config().vocab, {b, o.prefix}, i64);  // (B, prefix)
  m->forward(prompt, tlt::model::sequential_positions(torch::zeros({b}, i64), o.prefix),
             cache.get());
  for (int64_t i = 0; i < b; ++i) cache->commit_prefix(i, o.prefix);
  torch::Tensor toks = torch::randint(m->config().vocab, {b, n}, i64);  // (B, N)
  torch::Tensor pos = tlt::model::sequential_positions(torch::full({b}, o.prefix, i64), n);
  tlt::model::AttentionLayout layout;
  layout.tree =
      torch::ones({n, n}, torch::dtype(torch::kBool).device(dev)).tril().expand({b, n, n});
  Timing t{};
  t.eager_ms = median_ms(o.reps, [&] { m->forward(toks, pos, cache.get(), layout); });
  tlt::rollout::CudaGraphPool pool(m, cache.get());
  t.graph_ms = median_ms(o.reps, [&] { pool.forward(toks, pos, layout.tree); });
  return t;
}

// "1,4,16" -> {1, 4, 16}; entries that are not positive numbers are dropped.
std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    int64_t x = std::atoll(item.c_str());
    if (x > 0) v.push_back(x);
  }
  return v;
}

// One dtype's table (throws c10::Error when the forward fails in that dtype).
void run_dtype(const Options& o, torch::ScalarType dt, int64_t max_batch) {
  torch::manual_seed(0);
  Transformer m(tlt::bench::smollm2_135m_shape(o.prefix + 64));
  m->to(torch::Device(torch::kCUDA), dt);
  m->eval();
  std::printf("\n%s\n%5s %4s %10s %10s %8s %13s %13s\n", c10::toString(dt), "B", "N", "eager ms",
              "graph ms", "graph x", "ceiling eager", "ceiling graph");
  for (int64_t b : o.batches) {
    Timing one{};
    for (int64_t n : o.tokens) {
      Timing t = time_verify(m, b, n, o, max_batch);
      if (n == 1) one = t;
      std::printf("%5lld %4lld %10.3f %10.3f %7.2fx %12.2fx %12.2fx\n", (long long)b, (long long)n,
                  t.eager_ms, t.graph_ms, t.eager_ms / t.graph_ms, n * one.eager_ms / t.eager_ms,
                  n * one.graph_ms / t.graph_ms);
    }
  }
}

// ---- the engine end to end -------------------------------------------------------------------

struct EngineCase {
  std::string name;
  bool speculative, graphs;
  std::vector<std::string> arms;  // empty: plain
  std::string selector;
};

std::vector<tlt::rollout::Request> make_requests(int64_t n, int64_t vocab, int32_t new_tokens,
                                                 double temperature) {
  std::mt19937_64 rng(7);
  std::vector<tlt::rollout::Request> out;
  for (int64_t i = 0; i < n; ++i) {
    tlt::rollout::Request r;
    r.id = i;
    for (int j = 0; j < 32; ++j) r.prompt.push_back(int64_t(rng() % uint64_t(vocab)));
    r.max_new_tokens = new_tokens;
    r.sampling.temperature = temperature;
    r.seed = uint64_t(i);
    out.push_back(r);
  }
  return out;
}

// Tokens per second of one case on its second generate(); stats of that call in *st.
double engine_tokens_per_s(Transformer& m, tlt::model::Drafter drafter, const EngineCase& c,
                           int64_t b, double temperature, const Options& o,
                           tlt::rollout::EngineStats* st) {
  tlt::rollout::EngineOptions eo;
  eo.max_batch = b, eo.max_seq = 32 + o.new_tokens + 16;
  eo.speculative = c.speculative, eo.cuda_graphs = c.graphs;
  if (c.speculative) {
    eo.arms = c.arms, eo.selector = c.selector;
    eo.plain_arm = c.selector != "fixed";
    if (c.selector == "fixed") eo.activation_threshold = b + 1;  // always speculate
  }
  auto engine = tlt::rollout::Engine::create(m, drafter, eo);
  if (!engine.ok()) throw std::runtime_error(engine.status().to_string());
  std::vector<tlt::rollout::Request> reqs =
      make_requests(b, m->config().vocab, o.new_tokens, temperature);
  double tps = 0.0;
  for (int pass = 0; pass < 2; ++pass) {
    (*engine)->reset_stats();
    torch::cuda::synchronize();
    auto t0 = std::chrono::steady_clock::now();
    auto out = (*engine)->generate(reqs);
    torch::cuda::synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!out.ok()) throw std::runtime_error(out.status().to_string());
    *st = (*engine)->stats();
    tps = double(st->tokens) / s;
  }
  return tps;
}

// One batch size's rows: every case, ratios against plain with graphs (case 1) and eager (case 0).
void engine_rows(Transformer& m, tlt::model::Drafter& drafter, const std::vector<EngineCase>& cases,
                 int64_t b, double temperature, const Options& o) {
  std::vector<std::pair<double, tlt::rollout::EngineStats>> runs;  // per case, in order
  for (const EngineCase& c : cases) {
    tlt::rollout::EngineStats st;
    double tps = engine_tokens_per_s(m, c.speculative ? drafter : tlt::model::Drafter(nullptr), c,
                                     b, temperature, o, &st);
    runs.emplace_back(tps, st);
  }
  double eager = runs[0].first, plain = runs[1].first;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [tps, st] = runs[i];
    std::printf("%5lld  %-32s %10.1f %8.2fx %8.2fx %8.2f %7lld %13lld %15lld\n", (long long)b,
                cases[i].name.c_str(), tps, tps / plain, tps / eager, st.accept_length(),
                (long long)st.graph_replays, (long long)st.draft_graph_replays,
                (long long)st.draft_eager_fallbacks);
  }
}

void run_engine(const Options& o) {
  torch::manual_seed(0);
  tlt::model::ModelConfig cfg = tlt::bench::smollm2_135m_shape(32 + o.new_tokens + 16);
  cfg.tied_embeddings = false;
  Transformer m(cfg);
  m->to(torch::Device(torch::kCUDA), o.engine_dtype);
  m->eval();
  tlt::model::Drafter drafter(m, 1);  // untrained: its drafts are rarely accepted
  drafter->eval();
  const std::vector<EngineCase> cases{{"plain, eager", false, false, {}, ""},
                                      {"plain, graphs", false, true, {}, ""},
                                      {"ngram", true, true, {"ngram"}, "fixed"},
                                      {"4_1_5 (untrained drafter)", true, true, {"4_1_5"}, "fixed"},
                                      {"adaptive (4_1_5, 6_2_8, ngram)",
                                       true,
                                       true,
                                       {"4_1_5", "6_2_8", "ngram"},
                                       "bucketed-epsilon-greedy"}};
  for (double temperature : o.temperatures) {
    std::printf("\nengine end to end on CUDA: %s, %d new tokens per request, temperature %g\n",
                c10::toString(o.engine_dtype), o.new_tokens, temperature);
    std::printf("%5s  %-32s %10s %9s %9s %8s %7s %13s %15s\n", "B", "case", "tokens/s", "vs plain",
                "vs eager", "accept", "graphs", "draft replays", "eager fallbacks");
    for (int64_t b : o.batches) engine_rows(m, drafter, cases, b, temperature, o);
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: bench_cuda_verify [--batches 1,4,16,64] [--tokens 1,4,8,16] "
               "[--prefix 256] [--reps 20] [--dtype float32|bfloat16|both] [--engine] "
               "[--new 128] [--temperatures 0,0.7]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--engine") {
      o.engine = true;
      continue;
    }
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (a == "--batches") {
      o.batches = parse_list(v);
    } else if (a == "--tokens") {
      o.tokens = parse_list(v);
    } else if (a == "--prefix") {
      o.prefix = std::atoll(v);
    } else if (a == "--new") {
      o.new_tokens = std::max(1, std::atoi(v));
    } else if (a == "--reps") {
      o.reps = std::max(1, std::atoi(v));
    } else if (a == "--dtype") {
      std::string d = v;
      if (d == "float32")
        o.dtypes = {torch::kFloat32};
      else if (d == "bfloat16")
        o.dtypes = {torch::kBFloat16};
      else if (d != "both")
        return usage();
      if (o.dtypes.size() == 1) o.engine_dtype = o.dtypes[0];
    } else if (a == "--temperatures") {
      o.temperatures.clear();
      std::stringstream in(v);
      for (std::string item; std::getline(in, item, ',');)
        o.temperatures.push_back(std::atof(item.c_str()));
    } else {
      return usage();
    }
  }
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr,
                 "bench_cuda_verify: no CUDA device (torch::cuda::is_available() is false)\n");
    return 1;
  }
  if (o.tokens.empty() || o.tokens.front() != 1) o.tokens.insert(o.tokens.begin(), 1);
  int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  torch::NoGradGuard no_grad;
  std::printf(
      "verify forward of a SmolLM2-135M-shaped target on CUDA, prefix %lld tokens, "
      "median of %d\n",
      (long long)o.prefix, o.reps);
  int failed = 0;
  for (torch::ScalarType dt : o.dtypes) {
    try {
      run_dtype(o, dt, max_batch);
    } catch (const std::exception& e) {  // c10::Error too: report it, go on with the next dtype
      std::string what = e.what();
      std::printf("%s: FAILED: %s\n", c10::toString(dt), what.substr(0, what.find('\n')).c_str());
      failed = 1;
    }
  }
  if (o.engine) {
    try {
      run_engine(o);
    } catch (const std::exception& e) {
      std::string what = e.what();
      std::printf("engine: FAILED: %s\n", what.substr(0, what.find('\n')).c_str());
      failed = 1;
    }
  }
  return failed;
}
