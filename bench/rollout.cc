// bench/rollout: tokens/s of plain vs adaptive speculative decoding, side by side in one run.
//
// 1. Target: a preset trained with next-token loss on the tokenized corpus (the State of the
//    Union by default), cached; never a random model, whose speculation numbers mean nothing.
// 2. Drafter: trained for a bounded number of steps on the target's own generations.
// 3. For each batch size, the same requests (held-out prompts, long responses) decode plainly
//    and with the adaptive engine (bandit over the arms; plain above the threshold), on one
//    thread, as a rollout worker that owns one core would. Prints the ratios and the accepted
//    length per arm.
//    Before that, the speculation ceiling: what verifying k tokens per request costs against k
//    plain steps, the most any drafter could gain on this machine at each batch size.
//
// With --model PATH (a llama/qwen2 GGUF file or Hugging Face directory, runtime/model/
// pretrained.h): the pretrained model's load time and peak RSS, then its forward times of 1, 8
// and 16 new tokens per request at each batch size over a 256-position KV cache, and
// k x T(b,1)/T(b,k) at k = 8, and what bfloat16 products and a GRPO group's shared prompt buy
// the policy update (all with --ceiling-only). Then the drafter, warm-started on the
// model's own sampled answers to arithmetic-cot's training problems
// (rl::load_or_train_drafter_on_generations, cached), and step 3 on the task's held-out prompts
// rendered through the model's chat template, each response ending at the model's end token or
// --max-new: what an RLJob on this model decodes. No corpus.
//
// Usage: bench_rollout --tokens FILE [--preset small] [--train-steps 400] [--drafter-steps 400]
//                      [--batches 1,4,16,64] [--max-new 192] [--threads 1]
//                      [--ngram-shortcut 3] [--warmup-batches 1] [--fixed-batches 1,16]
//                      [--drafter-vocab 0] [--waves 3] [--repeats 2] [--show-bandit]
//                      [--selector-value throughput] [--catch-up-limit 8]
//                      [--draft-confidence 0] [--epsilon 0.1] [--group 1] [--ceiling-only]
//                      [--dtype auto]
//        bench_rollout --model PATH --ceiling-only [--batches 1,4,16] [--threads 1]
//        bench_rollout --model PATH --greedy-check [--batches 1,4,16] [--max-new 24]
//                      [--arms 4_1_5,4_2_8,ngram] [--dtype auto] (bench/rollout_lossless.h; exits
//                      1 when a response differs from plain decoding's)
//        bench_rollout --model PATH [--max-new 128] [--waves 2] [--drafter-steps 1600]
//                      [--drafter-prompts 384] [--drafter-levels 3] [--drafter-layers 1]
//                      [--drafter-vocab 2048] [--drafter-features last|fused|both]
//                      [--drafter-temperature -1] [--temperatures 0,0.7,1]
//                      [--coupled-drafts 1] [--coupling-noise 1] [the decoding flags above]
// --drafter-features both: the `last` and the fused (EAGLE-3) drafter, each warm-started on the
// same generations, measured against the same plain runs; with --temperatures, one table per
// temperature and then a summary of accept length and ratio to plain per drafter, batch size and
// arm (the adaptive engine, and each arm alone at --fixed-batches) side by side.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>

#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "api/arm.h"
#include "runtime/data/token_file.h"
#include "runtime/drafter/trainer.h"
#include "runtime/model/bfloat16_probe.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/precision.h"
#include "runtime/rollout/engine.h"
#ifdef TLT_HAVE_PRETRAINED
#include "bench/rollout_lossless.h"
#include "runtime/model/model_source.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/drafter_on_generations.h"
#include "runtime/rl/model_codec.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/sequences.h"
#include "runtime/rollout/generate_pretrained.h"
#endif
#include "runtime/cpu_info.h"
#include "runtime/torch_env.h"
#include "runtime/tst/trainer.h"

namespace {

using namespace tlt;
namespace fs = std::filesystem;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A comma-separated list of batch sizes ("" is empty); false at anything but positive integers.
// "0,0.7,1" -> {0, 0.7, 1}; false on an empty list, a malformed or a negative entry.
bool parse_doubles(const std::string& s, std::vector<double>* v) {
  v->clear();
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      double x = std::stod(item, &used);
      if (used != item.size() || x < 0) return false;
      v->push_back(x);
    } catch (const std::exception&) {
      return false;
    }
  }
  return !v->empty();
}

bool parse_list(const std::string& s, std::vector<int>* v) {
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) {
    if (x.empty() || x.size() > 6 || x.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(x) < 1)
      return false;
    v->push_back(std::stoi(x));
  }
  return true;
}

model::Transformer trained_target(const std::string& preset, const data::TokenizedCorpus& corpus,
                                  const std::vector<std::vector<int32_t>>& train,
                                  const std::vector<std::vector<int32_t>>& held, int steps,
                                  const std::string& cache) {
  model::ModelConfig cfg = *model::preset_config(preset, corpus.vocab);
  torch::manual_seed(0);
  model::Transformer target(cfg);
  if (fs::exists(cache) && model::load_checkpoint(*target, cache).ok()) {
    std::printf("target: loaded %s\n", cache.c_str());
    return target;
  }
  tst::TrainerOptions o;
  o.schedule.steps = steps, o.schedule.warmup = steps / 20, o.schedule.decay_fraction = 0.2;
  o.schedule.peak_lr = 2e-3, o.schedule.superposition = false;
  o.batch = 16, o.positions = 256, o.eval_batches = 2;
  tst::TSTTrainer trainer(target, tst::PackedStream(train, 1), tst::PackedStream(held, 2), o);
  double t0 = now();
  std::printf("target: training %s (%lld parameters) for %d steps...\n", preset.c_str(),
              (long long)cfg.parameter_count(), steps);
  while (!trainer.finished()) {
    tst::StepResult r = trainer.step();
    if ((r.step + 1) % std::max(1, steps / 10) == 0) {
      std::printf("  step %lld loss %.3f (%.0f s)\n", (long long)r.step + 1, r.loss, now() - t0);
      std::fflush(stdout);
    }
  }
  std::printf("target: held-out loss %.3f\n", trainer.evaluate());
  fs::create_directories(fs::path(cache).parent_path());
  if (!model::save_checkpoint(*target, cache, preset).ok()) std::printf("target: not cached\n");
  return target;
}

// n requests in groups of `group` that share a prompt (a GRPO group), each with its own seed.
std::vector<rollout::Request> prompts(const std::vector<std::vector<int32_t>>& held, int n,
                                      int max_new, double temperature, int offset, int group = 1) {
  std::vector<rollout::Request> out;
  for (int i = 0; i < n; ++i) {
    int g = i / std::max(1, group);
    const auto& d = held[size_t(g + offset) % held.size()];
    size_t start = (size_t(g) * 97) % std::max<size_t>(1, d.size() > 64 ? d.size() - 64 : 1);
    rollout::Request r;
    r.id = i;
    r.prompt.assign(d.begin() + long(start), d.begin() + long(std::min(d.size(), start + 32)));
    r.max_new_tokens = max_new;
    r.sampling.temperature = temperature;
    r.seed = uint64_t(i);
    out.push_back(r);
  }
  return out;
}

void train_drafter(model::Transformer target, model::Drafter drafter,
                   const std::vector<std::vector<int32_t>>& held, int steps) {
  // The target's own generations (temperature 1, as RL rollouts sample) are the training data.
  rollout::EngineOptions eo;
  eo.max_batch = 32, eo.max_seq = 512, eo.speculative = false;
  auto engine = std::move(rollout::Engine::create(target, model::Drafter(nullptr), eo).value());
  std::vector<rollout::Request> reqs = prompts(held, 64, 160, 1.0, 1000);
  std::vector<rollout::Completion> gens = *engine->generate(reqs);
  drafter::DrafterTrainer trainer(drafter, target, 1e-3);
  double t0 = now();
  for (int s = 0; s < steps; ++s) {
    std::vector<torch::Tensor> toks;
    for (int b = 0; b < 8; ++b) {
      size_t i = size_t(s * 8 + b) % reqs.size();
      std::vector<int64_t> seq = reqs[i].prompt;
      seq.insert(seq.end(), gens[i].tokens.begin(), gens[i].tokens.end());
      seq.resize(std::min<size_t>(seq.size(), 192));
      while (seq.size() < 192) seq.push_back(seq.back());
      toks.push_back(torch::tensor(seq, torch::kInt64));
    }
    torch::Tensor batch = torch::stack(toks);  // (8, 192)
    torch::Tensor hidden;
    {
      torch::NoGradGuard g;
      hidden =
          target->forward(batch, model::sequential_positions(torch::zeros({8}, torch::kInt64), 192))
              .hidden;
    }
    double loss = trainer.step(batch, hidden, torch::ones({8, 192}));
    if ((s + 1) % std::max(1, steps / 5) == 0) {
      std::printf("  drafter step %d loss %.3f (%.0f s)\n", s + 1, loss, now() - t0);
      std::fflush(stdout);
    }
  }
  drafter->eval();
}

struct Run {
  double tokens_per_s = 0, accept = 0;
  rollout::EngineStats stats;
  std::vector<rollout::Completion> out;
};

// Decodes `reqs` after the engine has served `warmup` (a rollout worker's engine lives across
// steps, so its bandit has seen earlier batches; only the measured batch counts).
bool show_bandit = false;
std::string selector_value = "throughput";
std::string exploration = "uniform";
int catch_up_limit = 8;
double draft_confidence = 0.0;
double epsilon = 0.1;
bool plain_floor = true;
bool reproducible = true;      // --reproducible: sampled chains as RLJob rollouts draw them
bool coupled_drafts = true;    // --coupled-drafts: sampled drafts at the target's race keys
double coupling_noise = 1.0;   // --coupling-noise: coupled trees' scoring (engine.h)
bool decode_bfloat16 = false;  // --dtype resolved: decoding's products in bfloat16
int64_t engine_max_seq = 512;  // positions per request of the measured engines
// Runs whose outputs should have been plain decoding's and were not: the process exits 1.
int not_lossless = 0;

// Whether `spec` gave plain decoding's tokens for every request.
bool same_tokens(const std::vector<rollout::Completion>& plain,
                 const std::vector<rollout::Completion>& spec) {
  bool same = plain.size() == spec.size();
  for (size_t i = 0; same && i < plain.size(); ++i) same = plain[i].tokens == spec[i].tokens;
  return same;
}

// One run's time by engine phase (EngineStats::phases), in seconds and as a share of the run.
void print_phases(const char* label, const rollout::EngineStats& s) {
  std::printf("       %-6s phases:", label);
  for (const auto& [name, sec] : s.phases.named(s.seconds))
    if (sec >= 0.0005 || name == "other") std::printf(" %s %.3fs", name.c_str(), sec);
  std::printf(" (total %.3fs)\n", s.seconds);
}

double kept(const rollout::EngineStats& s) {
  return s.drafted ? double(s.accepted) / double(s.drafted) : 0.0;
}

Run measure(model::Transformer target, model::Drafter drafter, int64_t batch,
            const std::vector<rollout::Request>& warmup, const std::vector<rollout::Request>& reqs,
            bool speculative, std::vector<std::string> arms, int64_t threshold, int32_t shortcut) {
  rollout::EngineOptions eo;
  eo.max_batch = batch;
  eo.max_seq = engine_max_seq;
  eo.speculative = speculative;
  eo.arms = arms;
  eo.selector = arms.size() == 1 ? "fixed" : "bucketed-epsilon-greedy";
  eo.activation_threshold = threshold;
  eo.ngram_shortcut = shortcut;
  eo.selector_value = selector_value;
  eo.selector_exploration = exploration;
  eo.drafter_catch_up_limit = catch_up_limit;
  eo.draft_confidence = draft_confidence;
  eo.epsilon = epsilon;
  eo.plain_floor = plain_floor;
  eo.reproducible = reproducible;
  eo.coupled_drafts = coupled_drafts;
  eo.coupling_noise = coupling_noise;
  eo.bfloat16 = decode_bfloat16;
  auto created = rollout::Engine::create(target, drafter, eo);
  if (!created.ok()) {  // e.g. a malformed --arms entry
    std::cerr << created.status().to_string() << "\n";
    std::exit(2);
  }
  auto engine = std::move(created).value();
  if (!warmup.empty()) engine->generate(warmup).value();
  engine->reset_stats();
  std::vector<rollout::Completion> out = engine->generate(reqs).value();
  if (show_bandit) {  // the bandit's value of each arm, per context
    auto& sel = engine->selector();
    bool speedup = sel.plain_seconds_per_token(batch) > 0;  // valued against plain decoding
    for (int c = 0; c < sel.contexts(); ++c) {
      std::printf("    bandit b=%lld %s (%s):", (long long)batch, c ? "copyable" : "drafting",
                  speedup ? "x plain" : "tok/s");
      for (int a = 0; a < sel.n_arms(); ++a) {
        int32_t cell = sel.cell_of(batch, c);
        if (speedup)  // with its standard error
          std::printf(" %.2f~%.2f", sel.value(cell, a), sel.standard_error(cell, a));
        else
          std::printf(" %.0f", sel.value(cell, a));
      }
      std::printf("\n");
    }
  }
  Run r;
  r.out = std::move(out);
  r.stats = engine->stats();
  r.tokens_per_s = r.stats.tokens / r.stats.seconds;
  r.accept = r.stats.accept_length();
  return r;
}

// "0", "0.7", "1": a temperature as --temperatures takes it.
std::string format_temperature(double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", t);
  return buf;
}

// What one side-by-side table measures (main's flags).
struct Table {
  std::vector<int> batches, fixed;  // batch sizes; those where each arm also runs alone
  std::vector<std::string> arms;
  std::string arms_s;
  int threads = 1, max_new = 192, shortcut = 3, warmup_batches = 1, waves = 3, repeats = 2;
  int group = 1;
  double temperature = 0.0;
};

// n requests from the `offset`-th prompt on (a GRPO group of `group` requests shares one).
using RequestMaker = std::function<std::vector<rollout::Request>(int n, int offset)>;

// One drafter's adaptive row of a table against plain decoding, its phases and whether its
// outputs are plain decoding's.
void print_row(int b, const std::string& name, const Run& plain, const Run& spec, const Table& t) {
  std::string usage;
  for (size_t a = 0; a < t.arms.size(); ++a)
    usage += t.arms[a] + ":" + std::to_string(spec.stats.arm_steps[a]) + " ";
  usage += "plain:" + std::to_string(spec.stats.plain_chosen);
  std::printf("%6d %-6s %12.1f %12.1f %7.2fx %8.2f %8lld %6.2f %s\n", b, name.c_str(),
              plain.tokens_per_s, spec.tokens_per_s, spec.tokens_per_s / plain.tokens_per_s,
              spec.accept, (long long)spec.stats.copied_drafts, kept(spec.stats), usage.c_str());
  print_phases("tlt", spec.stats);
  bool same = same_tokens(plain.out, spec.out);
  // Greedy and reproducible sampling must give plain decoding's tokens; rejection sampling
  // (--reproducible 0) gives other draws from the same distribution, which the tests check
  // (tests/runtime/rollout_test.cc, chi-square), not this bench.
  bool must_match = t.temperature == 0.0 || reproducible;
  not_lossless += must_match && !same;
  int64_t rows = spec.stats.bfloat16_rows;
  std::string products = !spec.stats.bfloat16 ? "float32"
                         : rows <= 1 ? "bfloat16, unpadded"
                                     : "bfloat16, padded to " + std::to_string(rows) + " rows";
  std::printf("       outputs: %s; products in %s\n",
              same         ? "identical token for token"
              : must_match ? "DIFFERENT (not lossless)"
                           : "other draws (rejection sampling: same distribution, not the same "
                             "tokens)",
              products.c_str());
}

// A drafter the table measures, by its feature mode (spec.drafter.features).
struct NamedDrafter {
  std::string name;  // "last" or "fused"
  model::Drafter drafter;
};

// One row of the side-by-side summary: an arm (or "adaptive") of one drafter at one batch size
// and temperature, against plain decoding of the same requests.
struct SummaryRow {
  std::string drafter, arm;
  int batch = 0;
  double temperature = 0, accept = 0, ratio = 0;
};

// For each batch size: plain vs adaptive tokens/s on the same requests (the faster of `repeats`
// alternating runs each), the accepted length, arm use and phases; at t.fixed batch sizes each
// arm alone too. Plain decoding runs once per batch size; each drafter of `drafters` runs the
// adaptive engine (and the fixed arms) against it. Appends every measured row to `summary`.
void compare(model::Transformer target, const std::vector<NamedDrafter>& drafters, const Table& t,
             const RequestMaker& make, std::vector<SummaryRow>* summary) {
  std::printf(
      "\nthreads=%d temperature=%.1f max_new=%d arms=%s threshold=32 "
      "ngram-shortcut=%d warm-up batches=%d waves=%d repeats=%d draft vocabulary=%lld "
      "selector value=%s exploration=%s epsilon=%.2f catch-up limit=%d draft confidence=%.2f "
      "group=%d plain floor=%d reproducible=%d coupled drafts=%d coupling noise=%.2f\n",
      t.threads, t.temperature, t.max_new, t.arms_s.c_str(), t.shortcut, t.warmup_batches, t.waves,
      t.repeats, (long long)drafters.front().drafter->draft_vocab_size(), selector_value.c_str(),
      exploration.c_str(), epsilon, catch_up_limit, draft_confidence, t.group, int(plain_floor),
      int(reproducible), int(coupled_drafts), coupling_noise);
  // kept: the share of verified drafted tokens that were accepted.
  std::printf("%6s %-6s %12s %12s %8s %8s %8s %6s %s\n", "batch", "feats", "plain tok/s",
              "tlt tok/s", "ratio", "accept", "copied", "kept", "arm steps");
  for (int b : t.batches) {
    // `waves` batches of b requests: each wave decodes at batch b until its responses end and
    // the next one joins as it leaves.
    int w = b >= 64 ? 1 : t.waves;
    std::vector<rollout::Request> reqs = make(b * w, 0);
    // Warm-up: earlier batches of other prompts (offsets past the measured ones).
    std::vector<rollout::Request> warm;
    for (int k = 0; k < t.warmup_batches; ++k) {
      std::vector<rollout::Request> more = make(b, 100 + 37 * k);
      warm.insert(warm.end(), more.begin(), more.end());
    }
    std::vector<Run> plain(1), spec(drafters.size());
    for (int r = 0; r < std::max(1, t.repeats); ++r) {
      Run p =
          measure(target, drafters.front().drafter, b, warm, reqs, false, t.arms, 32, t.shortcut);
      if (p.tokens_per_s > plain[0].tokens_per_s) plain[0] = p;
      for (size_t d = 0; d < drafters.size(); ++d) {
        Run s = measure(target, drafters[d].drafter, b, warm, reqs, true, t.arms, 32, t.shortcut);
        if (s.tokens_per_s > spec[d].tokens_per_s) spec[d] = s;
      }
    }
    print_phases("plain", plain[0].stats);
    for (size_t d = 0; d < drafters.size(); ++d) {
      print_row(b, drafters[d].name, plain[0], spec[d], t);
      summary->push_back({drafters[d].name, "adaptive", b, t.temperature, spec[d].accept,
                          spec[d].tokens_per_s / plain[0].tokens_per_s});
    }
    std::fflush(stdout);
    if (std::find(t.fixed.begin(), t.fixed.end(), b) == t.fixed.end()) continue;
    // Each arm alone on the same requests: what the bandit could have had.
    for (const NamedDrafter& nd : drafters) {
      for (const std::string& arm : t.arms) {
        Run r = measure(target, nd.drafter, b, {}, reqs, true, {arm}, 32, t.shortcut);
        double ratio = r.tokens_per_s / plain[0].tokens_per_s;
        bool lost = (t.temperature == 0.0 || reproducible) && !same_tokens(plain[0].out, r.out);
        not_lossless += lost;
        std::printf("       fixed %-5s %-6s %12.1f %7.2fx %8.2f %8lld %6.2f%s\n", nd.name.c_str(),
                    arm.c_str(), r.tokens_per_s, ratio, r.accept, (long long)r.stats.copied_drafts,
                    kept(r.stats), lost ? " outputs DIFFERENT (not lossless)" : "");
        summary->push_back({nd.name, arm, b, t.temperature, r.accept, ratio});
      }
      std::fflush(stdout);
    }
  }
}

// The summary of every table: per drafter, batch size and arm, the accept length and the ratio
// to plain decoding at each temperature, side by side.
void print_summary(const std::vector<SummaryRow>& rows, const std::vector<double>& temperatures) {
  std::printf("\nside by side: accept length (ratio to plain) per temperature\n");
  std::printf("%-6s %6s %-9s", "feats", "batch", "arm");
  for (double t : temperatures) std::printf("  %16s", ("T=" + format_temperature(t)).c_str());
  std::printf("\n");
  std::vector<std::string> seen;
  for (const SummaryRow& r : rows) {
    std::string key = r.drafter + "/" + std::to_string(r.batch) + "/" + r.arm;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    std::printf("%-6s %6d %-9s", r.drafter.c_str(), r.batch, r.arm.c_str());
    for (double t : temperatures) {
      auto it = std::find_if(rows.begin(), rows.end(), [&](const SummaryRow& x) {
        return x.drafter == r.drafter && x.batch == r.batch && x.arm == r.arm && x.temperature == t;
      });
      if (it == rows.end()) {
        std::printf("  %16s", "-");
      } else {
        char cell[32];
        std::snprintf(cell, sizeof cell, "%.2f (%.2fx)", it->accept, it->ratio);
        std::printf("  %16s", cell);
      }
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

// Seconds of one target forward of b x k new tokens per request over a cache already holding
// `context` positions per request: a plain decode step at k = 1, a chain verify of k - 1 drafts
// otherwise. The fastest of `reps` (noise only ever slows a forward); nothing is committed, so
// every repetition rewrites the same positions.
// `capacity`: positions the cache holds per request (0: just enough).
double forward_seconds(model::Transformer target, int64_t b, int64_t k, int64_t context, int reps,
                       int64_t capacity = 0) {
  torch::NoGradGuard no_grad;
  int64_t rows = decode_bfloat16 ? model::bfloat16_decode_rows(target) : 0;
  model::Bfloat16Inference bfloat16(rows > 0, rows);
  int64_t vocab = target->config().vocab;
  auto cache = target->make_cache(b, std::max(capacity, context + k + 1));
  for (int64_t i = 0; i < b; ++i) cache->add_slot();
  torch::Tensor zero = torch::zeros({b}, torch::kInt64);                      // (b,)
  torch::Tensor prompt = torch::randint(vocab, {b, context}, torch::kInt64);  // (b, context)
  // Prefilled 16 positions at a time: a forward's logits are (b, T, V), 400 MB for a 49152-token
  // vocabulary at b = 16, T = 128, which would swamp the model's own memory in the peak RSS.
  for (int64_t s = 0; s < context; s += 16) {
    int64_t n = std::min<int64_t>(16, context - s);
    target->forward(prompt.slice(1, s, s + n), model::sequential_positions(zero + s, n),
                    cache.get());  // (b, n) tokens
    for (int64_t i = 0; i < b; ++i) cache->commit_prefix(i, n);
  }
  torch::Tensor tokens = torch::randint(vocab, {b, k}, torch::kInt64);       // (b, k)
  torch::Tensor positions = model::sequential_positions(zero + context, k);  // (b, k)
  double best = 1e30;
  for (int r = 0; r < reps + 2; ++r) {  // two warm-up forwards
    double t0 = now();
    target->forward(tokens, positions, cache.get());
    if (r >= 2) best = std::min(best, now() - t0);
  }
  return best;
}

// The most any drafting strategy can gain at batch b on this machine: verifying k tokens per
// request in one forward against k plain steps, as if every draft were accepted and drafting
// cost nothing, i.e. max over k of k * T(b, 1) / T(b, k). Where decoding is bound by reading
// the weights (a GPU, or batch 1 here), T(b, k) barely grows with k and the bound is large;
// where it is bound by arithmetic, T(b, k) grows like k and the bound nears 1.
void print_ceiling(model::Transformer target, const std::vector<int>& batches, int64_t context) {
  const std::vector<int64_t> widths{2, 3, 5, 7, 8};
  std::printf(
      "\nspeculation ceiling (every draft accepted, drafting free; context %lld tokens):\n"
      "%6s %12s",
      (long long)context, "batch", "plain ms");
  for (int64_t k : widths) std::printf("   k=%lld ms", (long long)k);
  std::printf(" %9s\n", "ceiling");
  for (int b : batches) {
    double t1 = forward_seconds(target, b, 1, context, 10);
    double ceiling = 1.0;
    std::printf("%6d %12.2f", b, 1e3 * t1);
    for (int64_t k : widths) {
      double tk = forward_seconds(target, b, k, context, 10);
      ceiling = std::max(ceiling, double(k) * t1 / tk);
      std::printf(" %9.2f", 1e3 * tk);
    }
    std::printf(" %8.2fx\n", ceiling);
    std::fflush(stdout);
  }
}

#ifdef TLT_HAVE_PRETRAINED
// Positions already in the KV cache for the pretrained model's forward times (--ceiling-context).
int64_t ceiling_context = 128;

// The issue-19 table for a pretrained model: forward times of 1, 8 and 16 new tokens per request
// over a KV cache of ceiling_context + 128 positions (ceiling_context already filled; 256 and 128
// by default), and the ceiling k x T(b,1)/T(b,k) at k = 8. The fastest of 5 (each after two
// warm-ups).
void print_model_ceiling(model::Transformer target, const std::vector<int>& batches) {
  // A model shorter than that (the tiny test checkpoints) gets what its positions allow.
  const int64_t capacity = std::min<int64_t>(ceiling_context + 128, target->config().max_seq);
  const int64_t context = std::min<int64_t>(ceiling_context, capacity - 17);
  std::printf(
      "\nforward times, KV cache of %lld positions (%lld filled), fastest of 5:\n"
      "| batch | forward of 1 token | 8 tokens | 16 tokens | k x T(b,1)/T(b,k) at k=8 |\n"
      "|---:|---:|---:|---:|---:|\n",
      (long long)capacity, (long long)context);
  for (int b : batches) {
    double t1 = forward_seconds(target, b, 1, context, 5, capacity);
    double t8 = forward_seconds(target, b, 8, context, 5, capacity);
    double t16 = forward_seconds(target, b, 16, context, 5, capacity);
    std::printf("| %d | %.0f ms | %.0f ms | %.0f ms | %.2fx |\n", b, 1e3 * t1, 1e3 * t8, 1e3 * t16,
                8.0 * t1 / t8);
    std::fflush(stdout);
  }
}

// Loads --model PATH and prints what it is, its load time and peak RSS; the loader's error.
StatusOr<model::PretrainedModel> load_model(const std::string& path, int threads) {
  double t0 = now();
  StatusOr<model::PretrainedModel> m = model::load_pretrained(path);
  if (!m.ok()) return m.status().with_context("--model");
  const model::ModelConfig& c = m->config.config;
  int64_t params = 0;
  std::set<const void*> seen;  // a tied LM head is the embedding: count it once
  for (const auto& p : m->model->parameters())
    if (seen.insert(p.data_ptr()).second) params += p.numel();
  std::printf(
      "model=%s architecture=%s layers=%lld dim=%lld vocab=%lld parameters=%lld "
      "threads=%d\nload_seconds=%.2f peak_rss_mb_after_load=%lld\n",
      path.c_str(), m->config.architecture.c_str(), (long long)c.n_layers, (long long)c.dim,
      (long long)c.vocab, (long long)params, threads, now() - t0,
      (long long)(rollout::peak_rss_bytes() >> 20));
  m->model->eval();
  return m;
}

// What bfloat16 products buy the policy update (spec.model.dtype): the forward and backward of
// its log-probabilities (rl::sequence_logprobs) over one micro-batch of 4 rows of 64 prompt + 192
// response tokens (the trainer's 1024-token budget; less for a model of shorter context),
// float32 against bfloat16 products, side by side, the fastest of 3 each.
void print_update_precision(model::Transformer target) {
  const int64_t row = std::min<int64_t>(256, target->config().max_seq), prompt = row / 4;
  torch::manual_seed(3);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int i = 0; i < 4; ++i) {
    torch::Tensor p = torch::randint(target->config().vocab, {prompt}, torch::kInt64);  // (P,)
    torch::Tensor r = torch::randint(target->config().vocab, {row - prompt}, torch::kInt64);
    prompts.emplace_back(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
  }
  rl::SequenceBatch batch = rl::make_batch(prompts, responses);
  auto seconds = [&](bool bf16) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      target->zero_grad();
      double t0 = now();
      torch::Tensor logp;  // (4, row - 1)
      {
        model::Bfloat16Autocast mixed(torch::kCPU, bf16);
        logp = rl::sequence_logprobs(target, batch, 1.0);
      }
      logp.sum().backward();
      best = std::min(best, now() - t0);
    }
    target->zero_grad();
    return best;
  };
  double f32 = seconds(false), bf16 = seconds(true);
  std::printf(
      "\npolicy update, forward + backward of %lld tokens: float32 %.2f s, bfloat16 products "
      "%.2f s = %.2fx (spec.model.dtype; native bfloat16 here: %s)\n",
      (long long)(4 * row), f32, bf16, f32 / bf16,
      model::native_bfloat16(torch::kCPU) ? "yes" : "no");
}

// What bfloat16 products buy the drafter's training (the warm start and the spot trainers, under
// spec.model.dtype): one optimizer step of a one-layer drafter at the target's width over 16
// windows of 64 positions, 3 unrolled levels and a 2048-token draft vocabulary (an RLJob's
// defaults for a real model), float32 against bfloat16 products, the fastest of 3 each after one
// warm-up step. The windows are random tokens with random target features: the cost does not
// depend on them.
void print_drafter_precision(model::Transformer target) {
  const int64_t windows = 16, len = 64, c = target->config().dim;
  const int64_t vocab = std::min<int64_t>(2048, target->config().vocab);
  torch::manual_seed(4);
  torch::Tensor tokens = torch::randint(target->config().vocab, {windows, len}, torch::kInt64);
  torch::Tensor hidden = torch::randn({windows, len, c});  // (B, T, C)
  torch::Tensor mask = torch::ones({windows, len});        // (B, T)
  auto seconds = [&](bool bf16) {
    torch::manual_seed(1);
    model::Drafter drafter(target, 1);
    Status st = drafter->set_draft_vocab(torch::arange(vocab, torch::kInt64));
    if (!st.ok()) {
      std::cerr << "drafter training step: " << st.to_string() << "\n";
      std::exit(1);
    }
    drafter::DrafterTrainer trainer(drafter, target, 1e-3, 3, bf16);
    trainer.step(tokens, hidden, mask);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      double t0 = now();
      trainer.step(tokens, hidden, mask);
      best = std::min(best, now() - t0);
    }
    return best;
  };
  double f32 = seconds(false), bf16 = seconds(true);
  std::printf(
      "\ndrafter training step (%lld windows of %lld, 3 levels, %lld-token draft vocabulary): "
      "float32 %.3f s, bfloat16 products %.3f s = %.2fx\n",
      (long long)windows, (long long)len, (long long)vocab, f32, bf16, f32 / bf16);
}

// What sharing a GRPO group's prompt buys the policy update (rl::GrpoOptions::share_prompts): one
// whole update (rl::PolicyTrainer::update: reference and old log-probabilities, two minibatch
// steps) over one group of 8 answers to one prompt, each sample running its whole sequence
// against the prompt run once per pass, side by side, the fastest of 2 each. The shape is
// bench/rl_e2e_model.yaml's first step on SmolLM2: a 96-token chat prompt (arithmetic-cot's
// through SmolLM2's template: 90-100 tokens), answers long-tailed around a median of ~60 tokens
// (lengths below), products in bfloat16 where the CPU has them (spec.model.dtype auto).
void print_update_sharing(const model::Transformer& target) {
  const int64_t prompt = std::min<int64_t>(96, target->config().max_seq / 4);
  std::vector<int64_t> lengths{222, 120, 80, 65, 58, 50, 40, 30};
  torch::manual_seed(5);
  torch::Tensor p = torch::randint(target->config().vocab, {prompt}, torch::kInt64);  // (P,)
  std::vector<int64_t> ids(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + prompt);
  std::vector<std::vector<int64_t>> prompts, responses;
  int64_t positions = 0;
  for (int64_t n : lengths) {
    n = std::min<int64_t>(n, target->config().max_seq - prompt);
    torch::Tensor r = torch::randint(target->config().vocab, {n}, torch::kInt64);  // (n,)
    prompts.push_back(ids);
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + n);
    positions += prompt + n;
  }
  rl::SequenceBatch batch = rl::make_batch(prompts, responses);
  torch::Tensor advantages = torch::randn({int64_t(lengths.size())});  // (B,)
  auto seconds = [&](bool share, int64_t* run) {
    rl::GrpoOptions o;
    o.kl_coef = 0.01, o.temperature = 0.7, o.share_prompts = share;
    o.bfloat16 = model::native_bfloat16(torch::kCPU);
    double best = 1e30;
    for (int rep = 0; rep < 2; ++rep) {
      rl::PolicyTrainer trainer(target, target, o);  // the update moves target's weights a little
      double t0 = now();
      rl::UpdateStats st = trainer.update(batch, advantages);
      best = std::min(best, now() - t0);
      *run = st.positions;
    }
    return best;
  };
  int64_t whole_positions = 0, shared_positions = 0;
  double whole = seconds(false, &whole_positions), shared = seconds(true, &shared_positions);
  std::printf(
      "\npolicy update of one GRPO group (8 answers of %lld-%lld tokens to one %lld-token prompt, "
      "%lld tokens): whole sequences %.2f s (%lld positions per pass), prompt shared %.2f s (%lld) "
      "= %.2fx\n",
      (long long)lengths.back(), (long long)lengths.front(), (long long)prompt,
      (long long)positions, whole, (long long)whole_positions, shared, (long long)shared_positions,
      whole / shared);
}

// --model PATH --ceiling-only: load, report memory, print the table. The process's exit code.
int model_ceiling(const std::string& path, const std::vector<int>& batches, int threads) {
  runtime::configure_threads(threads);
  StatusOr<model::PretrainedModel> m = load_model(path, threads);
  if (!m.ok()) {
    std::cerr << m.status().to_string() << "\n";
    return 1;
  }
  print_model_ceiling(m->model, batches);
  print_update_precision(m->model);
  print_drafter_precision(m->model);
  print_update_sharing(m->model);
  std::printf("peak_rss_mb=%lld\n", (long long)(rollout::peak_rss_bytes() >> 20));
  return 0;
}

// The task a --model run decodes: an RLJob's default (arithmetic-cot, task seed 1).
constexpr const char* kModelTask = "arithmetic-cot";
constexpr uint64_t kModelTaskSeed = 1;

// How a --model run's drafter is warm-started (--drafter-steps, --drafter-vocab,
// --drafter-prompts).
// The defaults are the warm start docs/benchmarks.md measures SmolLM2 with: about 14 minutes on
// two cores, cached.
struct ModelDrafter {
  int steps = 1600, vocab = 2048, prompts = 384, levels = 3, layers = 1;
  double temperature = 1.0;                   // the warm start's sampling (--drafter-temperature)
  std::vector<std::string> features{"last"};  // --drafter-features: the drafters measured
};

// The drafter of a --model run: warm-started on the model's own sampled answers to the task's
// training problems (rl::load_or_train_drafter_on_generations, cached under cache_root()).
StatusOr<rl::GenerationsWarmStart> model_drafter(const std::string& path, model::Transformer target,
                                                 model::Drafter drafter, const rl::Task& task,
                                                 const rl::Codec& codec, const ModelDrafter& d,
                                                 int max_new) {
  rl::GenerationsWarmStartOptions o;
  o.steps = d.steps, o.max_new_tokens = max_new, o.vocab_subset = d.vocab, o.prompts = d.prompts;
  o.bfloat16 = o.train_bfloat16 = decode_bfloat16;
  o.train_levels = d.levels;
  o.temperature = d.temperature;  // the rollouts' own, as an RLJob's warm start samples
  o.max_seq = engine_max_seq, o.codec = &codec;
  o.log = [](const std::string& s) { std::printf("  %s\n", s.c_str()), std::fflush(stdout); };
  o.curve_every = std::max(1, d.steps / 4);  // the acceptance curve, printed as it trains
  double t0 = now();
  std::printf(
      "drafter (features=%s, %d layer%s): warm start on the model's generations (%lld prompts, %d "
      "steps, %d training levels, sampled at temperature %g)\n",
      model::drafter_features_name(drafter->features_mode()), d.layers, d.layers == 1 ? "" : "s",
      (long long)o.prompts, d.steps, d.levels, d.temperature);
  std::fflush(stdout);
  return rl::load_or_train_drafter_on_generations(
      target, drafter, task, o, model::model_identity(path),
      std::string(kModelTask) + "-" + std::to_string(kModelTaskSeed), data::cache_root(),
      [&](int64_t s, double loss) {
        if (s % std::max(1, d.steps / 5) == 0) {
          std::printf("  drafter step %lld loss %.3f (%.0f s)\n", (long long)s, loss, now() - t0);
          std::fflush(stdout);
        }
      });
}

// Greedy agreement of the drafter with the target, level by level, on the target's greedy answers
// to held-out problems the table does not decode (rl::held_out_agreement). The exit code.
int print_agreement(model::Transformer target, model::Drafter drafter, const rl::Task& task,
                    const rl::Codec& codec, int max_new) {
  constexpr int64_t kFirst = 1000, kProblems = 32, kLevels = 6;
  double t0 = now();
  StatusOr<drafter::LevelAgreement> a =
      rl::held_out_agreement(target, drafter, task, &codec, kFirst, kProblems, max_new,
                             engine_max_seq, kLevels, decode_bfloat16);
  if (!a.ok()) {
    std::cerr << a.status().to_string() << "\n";
    return 1;
  }
  std::printf(
      "drafter: greedy chains on %lld held-out answers (%lld bases, %.0f s): share whose "
      "first d drafts all match the target\n  d:",
      (long long)kProblems, (long long)(a->bases.empty() ? 0 : a->bases[0]), now() - t0);
  for (size_t d = 0; d < a->bases.size(); ++d) std::printf(" %zu=%.3f", d + 1, a->share(d));
  double sum = 0;
  for (size_t d = 0; d < a->bases.size(); ++d) sum += a->share(d);
  std::printf("\n  accepted drafts per verification of a greedy chain of %lld: %.2f\n",
              (long long)a->bases.size(), sum);
  std::fflush(stdout);
  return 0;
}

// --model PATH --greedy-check: main's flags where given, else GreedyCheckOptions' defaults.
int greedy_check(const std::string& path, const CLI::App& app, const std::vector<int>& batches,
                 const std::vector<std::string>& arms, int max_new, int threads) {
  bench::GreedyCheckOptions o;
  if (app.count("--batches")) o.batches = batches;
  if (app.count("--arms")) o.arms = arms;
  if (app.count("--max-new")) o.max_new = max_new;
  o.bfloat16 = decode_bfloat16, o.threads = threads;
  return bench::greedy_check(path, o);
}

// --model PATH: the ceilings, the drafter (cached), then the side-by-side table on the task's
// held-out prompts through the model's chat template. The process's exit code.
int model_compare(const std::string& path, const Table& t, const ModelDrafter& d,
                  const std::vector<double>& temperatures, bool prepare_only) {
  runtime::configure_threads(prepare_only ? 0 : t.threads);
  StatusOr<model::PretrainedModel> m = load_model(path, t.threads);
  if (!m.ok()) {
    std::cerr << m.status().to_string() << "\n";
    return 1;
  }
  model::Transformer target = m->model;
  // Prompt + response + drafts; a model of shorter context (the tiny test checkpoints) gets its
  // own.
  engine_max_seq = std::min<int64_t>(engine_max_seq, target->config().max_seq);
  if (!prepare_only) print_model_ceiling(target, t.batches);
  StatusOr<model::ModelSource> source = model::resolve_model_source(path, "auto");
  StatusOr<std::unique_ptr<rl::ModelCodec>> codec =
      source.ok() ? rl::ModelCodec::load(*source, target->config().vocab)
                  : StatusOr<std::unique_ptr<rl::ModelCodec>>(source.status());
  StatusOr<std::unique_ptr<rl::Task>> task = rl::make_task(kModelTask, kModelTaskSeed);
  if (!codec.ok() || !task.ok()) {
    std::cerr << "--model: " << (codec.ok() ? task.status() : codec.status()).to_string() << "\n";
    return 1;
  }
  // Every drafter before any warm start: a fused one turns on the target's feature export, and
  // all then generate with it on. The export leaves the target's tokens as they were, so each
  // warm start (same options, same seeds) trains on the same generations.
  std::vector<NamedDrafter> drafters;
  for (const std::string& f : d.features) {
    torch::manual_seed(1);
    drafters.push_back({f, model::Drafter(target, d.layers, *model::parse_drafter_features(f))});
  }
  for (NamedDrafter& nd : drafters) {
    StatusOr<rl::GenerationsWarmStart> w =
        model_drafter(path, target, nd.drafter, **task, **codec, d, t.max_new);
    if (!w.ok()) {
      std::cerr << w.status().to_string() << "\n";
      return 1;
    }
    std::printf(
        "drafter (features=%s): %s %s (%lld generated tokens, loss %.3f -> %.3f, draft "
        "vocabulary %lld)\n",
        nd.name.c_str(), w->trained ? "trained and cached" : "loaded", w->cache_path.c_str(),
        (long long)w->generated_tokens, w->loss_first, w->loss_last,
        (long long)nd.drafter->draft_vocab_size());
    if (prepare_only && print_agreement(target, nd.drafter, **task, **codec, t.max_new) != 0)
      return 1;
  }
  if (prepare_only) return 0;
  rl::TaskRequestOptions ro;
  ro.max_new_tokens = t.max_new, ro.max_seq = engine_max_seq;
  RequestMaker make_requests = [&](int n, int offset) {
    int g = std::max(1, t.group);  // held-out problems offset.., each asked g times
    StatusOr<std::vector<rollout::Request>> base =
        rl::task_requests(**task, **codec, uint64_t(offset), (n + g - 1) / g, true, ro);
    if (!base.ok()) {
      std::cerr << base.status().to_string() << "\n";
      std::exit(1);
    }
    std::vector<rollout::Request> out;
    for (int i = 0; i < n; ++i) {
      out.push_back((*base)[size_t(i / g)]);
      out.back().id = i, out.back().seed = uint64_t(i);
    }
    return out;
  };
  std::vector<SummaryRow> summary;
  for (double temperature : temperatures) {
    Table tt = t;
    tt.temperature = ro.temperature = temperature;
    compare(target, drafters, tt, make_requests, &summary);
  }
  if (temperatures.size() > 1 || drafters.size() > 1) print_summary(summary, temperatures);
  return not_lossless == 0 ? 0 : 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_rollout: plain vs adaptive speculative decoding"};
  std::string tokens, preset = "small", batches_s = "1,4,16,64";
  int train_steps = 400, drafter_steps = 400, max_new = 192, threads = 1;
  double temperature = 0.0;
  int shortcut = 3, warmup_batches = 1, drafter_vocab = 0, waves = 3, repeats = 2, group = 1;
  int drafter_prompts = 384;
  double drafter_temperature = -1;  // auto
  int drafter_layers = 1;
  int drafter_levels = 3;
  std::string drafter_features = "last", temperatures_s;
  std::string fixed_s = "1,16", arms_s = "4_1_5,6_1_7,4_2_8,ngram";
  bool prepare_only = false, ceiling_only = false, greedy = false;
  std::string model_path, decode_dtype = "auto";
  app.add_option("--tokens", tokens, "Tokenized corpus (tlt-data tokenize); not with --model");
  app.add_option("--model", model_path,
                 "A llama/qwen2 GGUF file or Hugging Face directory: its ceilings, then plain vs "
                 "adaptive on arithmetic-cot's held-out prompts through its chat template, with a "
                 "drafter warm-started on its own generations (cached). Its defaults: --max-new "
                 "128 --waves 2 --drafter-steps 200 --drafter-vocab 2048 (--ceiling-only: "
                 "--batches 1,4,16)");
  app.add_flag("--prepare-only", prepare_only,
               "Train and cache target and drafter (on all cores), then exit");
  app.add_flag("--ceiling-only", ceiling_only,
               "Print only the speculation ceiling per batch size (no decoding runs)");
  app.add_flag("--greedy-check", greedy,
               "--model: plain vs each arm alone, greedy, at each batch size (default 1,4,16, "
               "24 new tokens): exit 1 unless every response equals plain decoding's");
  app.add_option("--ceiling-context", ceiling_context,
                 "--model: tokens already in each request's KV cache for the ceiling's forward "
                 "times (a job's prompt plus response so far: attention grows with it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--preset", preset, "Target preset")->capture_default_str();
  app.add_option("--train-steps", train_steps, "Target training steps (cached)")
      ->capture_default_str();
  app.add_option("--drafter-steps", drafter_steps,
                 "Drafter training steps (cached; --model: 1600 unless given)")
      ->capture_default_str();
  app.add_option("--arms", arms_s,
                 "The adaptive engine's arms (depth_topk_verifyTokens, ngram, ngram_D; --model: "
                 "2_1_3,4_1_5,4_2_8,6_3_16 unless given)")
      ->capture_default_str();
  app.add_option("--batches", batches_s, "Batch sizes")->capture_default_str();
  app.add_option("--max-new", max_new, "Tokens per response")->capture_default_str();
  app.add_option("--threads", threads, "Compute threads (a worker owns one core)")
      ->capture_default_str();
  app.add_option("--temperature", temperature, "0 = greedy")->capture_default_str();
  app.add_option("--ngram-shortcut", shortcut,
                 "Drafter arms copy drafts from context after a recurring n-gram this long "
                 "(0: off)")
      ->capture_default_str();
  app.add_option("--drafter-layers", drafter_layers,
                 "--model: the drafter's decoder layers (spec.drafter.layers)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  app.add_option("--drafter-temperature", drafter_temperature,
                 "--model: the temperature the drafter's warm start samples the model's answers "
                 "at (as an RLJob's warm start samples at the job's); -1: the first sampled "
                 "temperature of --temperature(s), or 1 when all are 0")
      ->capture_default_str();
  app.add_option("--drafter-prompts", drafter_prompts,
                 "--model: training problems the model answers for its drafter's warm start "
                 "(cached per count; more give longer accepted drafts and a longer first run)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--drafter-levels", drafter_levels,
                 "--model: drafting levels the drafter's warm start unrolls in training (1: the "
                 "target's features only; cached per value)")
      ->capture_default_str();
  app.add_option("--drafter-features", drafter_features,
                 "--model: the drafter's features (spec.drafter.features): last, fused, or both "
                 "(each warm-started on the same generations, measured side by side)")
      ->check(CLI::IsMember({"last", "fused", "both"}))
      ->capture_default_str();
  app.add_option("--temperatures", temperatures_s,
                 "--model: comma-separated temperatures (e.g. 0,0.7,1), one table each and a "
                 "side-by-side summary; overrides --temperature");
  app.add_option("--drafter-vocab", drafter_vocab,
                 "Draft over the this-many most frequent tokens of the training text (--model: of "
                 "the model's generations; 0: all)")
      ->capture_default_str();
  app.add_option("--repeats", repeats,
                 "Plain and adaptive runs per batch size, alternating; the faster of each counts "
                 "(a shared machine's noise only ever slows a run)")
      ->capture_default_str();
  app.add_option("--selector-value", selector_value,
                 "How the bandit values an arm's steps: throughput or median")
      ->capture_default_str();
  app.add_option("--exploration", exploration,
                 "Which arm the bandit's exploration picks: uniform or weighted (by value)")
      ->capture_default_str();
  app.add_option("--catch-up-limit", catch_up_limit,
                 "Pending pairs a request keeps for the drafter's catch-up (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--draft-confidence", draft_confidence,
                 "Verify a drafter's node only when its path's drafter probability reaches this "
                 "(0: every node)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--reproducible", reproducible,
                 "Sampled requests (--temperature > 0): draft and verify so that each request's "
                 "tokens are plain sampling's for its seed, as RLJob rollouts do (0: speculative "
                 "rejection sampling, the same distribution with other draws)")
      ->capture_default_str();
  app.add_option("--coupled-drafts", coupled_drafts,
                 "Sampled requests' chains (--reproducible 1) and trees draft the drafter's own "
                 "race at the keys the target will draw with (0: the drafter's likeliest tokens)")
      ->capture_default_str();
  app.add_option("--coupling-noise", coupling_noise,
                 "Coupled trees: the scale of the Gumbel noise by which the target is assumed to "
                 "differ from the drafter, in log-probability (smaller: deeper trees)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--plain-floor", plain_floor,
                 "The bandit keeps a floor under plain decoding (confidence bounds; 0: plain is "
                 "one more epsilon-greedy arm)")
      ->capture_default_str();
  app.add_option("--epsilon", epsilon, "The bandit's exploration rate")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--dtype", decode_dtype,
                 "Decoding's matrix products: float32, bfloat16, or auto (bfloat16 for --model on "
                 "hardware with native bfloat16, as spec.model.dtype decides for a job)")
      ->check(CLI::IsMember({"auto", "float32", "bfloat16"}))
      ->capture_default_str();
  app.add_flag(
      "--show-bandit", show_bandit,
      "Print the bandit's value (tok/s) of each arm (plain last; -1: never tried) per context");
  app.add_option("--group", group,
                 "Consecutive requests sharing a prompt (a GRPO group; the history arm drafts "
                 "from finished siblings)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--waves", waves,
                 "Measured batches of each size served one after another (batch 64: one)")
      ->capture_default_str();
  app.add_option("--warmup-batches", warmup_batches,
                 "Batches the engine serves before the measured one (its bandit learns)")
      ->capture_default_str();
  app.add_option("--fixed-batches", fixed_s, "Batch sizes at which each arm also runs alone")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  // A real model's arms: short chains for the larger batches, longer chains and a coupled tree
  // for the small ones (docs/benchmarks.md measures each).
  if (!model_path.empty() && app.count("--arms") == 0) arms_s = "2_1_3,4_1_5,4_2_8,6_3_16";
  std::vector<int> batches, fixed;
  if (!parse_list(batches_s, &batches) || !parse_list(fixed_s, &fixed)) {
    std::cerr << "--batches and --fixed-batches take comma-separated positive batch sizes such "
                 "as 1,16 (--fixed-batches \"\" for none)\n";
    return 2;
  }

  decode_bfloat16 = model::use_bfloat16(decode_dtype, !model_path.empty(), torch::kCPU);
  std::printf("cpu: %s\ndecoding: %s products (--dtype %s)\n",
              runtime::describe(runtime::cpu_info()).c_str(),
              decode_bfloat16 ? "bfloat16" : "float32", decode_dtype.c_str());

  std::vector<std::string> arms;
  std::stringstream arms_ss(arms_s);
  for (std::string a; std::getline(arms_ss, a, ',');) {
    api::Arm parsed;
    std::string why;
    if (!api::parse_arm(a, &parsed, &why)) {
      std::cerr << "--arms \"" << a << "\": " << why << "\n";
      return 2;
    }
    arms.push_back(a);
  }

  if (!model_path.empty()) {
#ifdef TLT_HAVE_PRETRAINED
    if (ceiling_only) {
      if (app.count("--batches") == 0) batches = {1, 4, 16};
      return model_ceiling(model_path, batches, threads);
    }
    if (greedy) return greedy_check(model_path, app, batches, arms, max_new, threads);
    // Shorter runs than a preset's: a forward of SmolLM2 costs ~10x the small preset's.
    if (app.count("--max-new") == 0) max_new = 128;
    if (app.count("--waves") == 0) waves = 2;
    ModelDrafter d;
    if (app.count("--drafter-steps")) d.steps = drafter_steps;
    if (app.count("--drafter-vocab")) d.vocab = drafter_vocab;
    d.levels = drafter_levels;
    d.layers = drafter_layers;
    d.prompts = drafter_prompts;
    d.features = drafter_features == "both" ? std::vector<std::string>{"last", "fused"}
                                            : std::vector<std::string>{drafter_features};
    std::vector<double> temps{temperature};
    if (!temperatures_s.empty() && !parse_doubles(temperatures_s, &temps)) {
      std::cerr << "--temperatures takes comma-separated temperatures >= 0 such as 0,0.7,1\n";
      return 2;
    }
    d.temperature = drafter_temperature;
    if (d.temperature < 0) {  // auto: the first sampled temperature measured, else 1
      d.temperature = 1.0;
      for (double t : temps) {
        if (t > 0) {
          d.temperature = t;
          break;
        }
      }
    }
    Table table{batches,  fixed,          arms,  arms_s,  threads, max_new,
                shortcut, warmup_batches, waves, repeats, group,   temperature};
    return model_compare(model_path, table, d, temps, prepare_only);
#else
    std::cerr << "--model: this build has no pretrained-model loader (TLT_CORE_ONLY)\n";
    return 2;
#endif
  }
  if (drafter_features != "last" || !temperatures_s.empty()) {
    std::cerr << "--drafter-features and --temperatures are for --model runs\n";
    return 2;
  }
  if (tokens.empty()) {
    std::cerr << "--tokens FILE is required (a tokenized corpus; bench/rollout.sh passes it), "
                 "or --model PATH\n";
    return 2;
  }
  Table table{batches,  fixed,          arms,  arms_s,  threads, max_new,
              shortcut, warmup_batches, waves, repeats, group,   temperature};

  auto corpus = data::read_token_file(tokens);
  if (!corpus.ok()) {
    std::cerr << corpus.status().to_string() << "\n";
    return 1;
  }
  std::vector<std::vector<int32_t>> train, held;
  for (auto& d : corpus->docs)
    (data::held_out_by_name(d.name, 0.05) ? held : train).push_back(d.ids);
  // BLIS reads its thread count once, so training (all cores) and measuring (one core per
  // worker) run in separate processes: bench/rollout.sh calls --prepare-only first.
  runtime::configure_threads(prepare_only ? 0 : threads);
  std::string cache = data::cache_root() + "/bench/target-" + preset + "-" +
                      std::to_string(corpus->vocab) + "-" + std::to_string(train_steps) + ".ckpt";
  model::Transformer target = trained_target(preset, *corpus, train, held, train_steps, cache);
  target->eval();
  torch::manual_seed(1);
  model::Drafter drafter(target, 1);
  std::string drafter_cache = cache + ".drafter-" + std::to_string(drafter_steps);
  if (fs::exists(drafter_cache) && model::load_checkpoint(*drafter, drafter_cache).ok()) {
    std::printf("drafter: loaded %s\n", drafter_cache.c_str());
  } else {
    std::printf("drafter: training %d steps on the target's generations\n", drafter_steps);
    train_drafter(target, drafter, held, drafter_steps);
    if (!model::save_checkpoint(*drafter, drafter_cache, "drafter").ok())
      std::printf("drafter: not cached\n");
  }
  drafter->eval();
  if (prepare_only) return 0;
  if (drafter_vocab > 0) {
    std::vector<int64_t> counts(size_t(corpus->vocab), 0);
    for (const auto& d : train)
      for (int32_t t : d) ++counts[size_t(t)];
    Status st = drafter->set_draft_vocab(model::most_frequent_tokens(counts, drafter_vocab));
    if (!st.ok()) {
      std::cerr << st.to_string() << "\n";
      return 1;
    }
  }
  // Mid-response: the 32-token prompt plus half the response.
  print_ceiling(target, batches, 32 + max_new / 2);
  if (ceiling_only) return 0;
  std::vector<SummaryRow> summary;
  compare(
      target, {{"last", drafter}}, table,
      [&](int n, int offset) { return prompts(held, n, max_new, temperature, offset, group); },
      &summary);
  if (not_lossless > 0)
    std::printf("%d runs differ from plain decoding: not lossless\n", not_lossless);
  return not_lossless == 0 ? 0 : 1;
}
