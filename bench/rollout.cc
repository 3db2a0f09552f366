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
// This file holds main and the preset's target and drafter; the side-by-side measurement is
// rollout_compare.h, the --model runs rollout_model.h, the greedy check rollout_lossless.h.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "api/arm.h"
#include "bench/rollout_compare.h"
#include "runtime/data/token_file.h"
#include "runtime/drafter/trainer.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/precision.h"
#include "runtime/rollout/engine.h"
#ifdef TLT_HAVE_PRETRAINED
#include "bench/rollout_lossless.h"
#include "bench/rollout_model.h"
#endif
#include "runtime/cpu_info.h"
#include "runtime/torch_env.h"
#include "runtime/tst/trainer.h"

namespace {

using namespace tlt;
using bench::now;
namespace fs = std::filesystem;

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

#ifdef TLT_HAVE_PRETRAINED
// --model PATH --greedy-check: main's flags where given, else GreedyCheckOptions' defaults.
int greedy_check(const std::string& path, const CLI::App& app, const std::vector<int>& batches,
                 const std::vector<std::string>& arms, int max_new, int threads) {
  bench::GreedyCheckOptions o;
  if (app.count("--batches")) o.batches = batches;
  if (app.count("--arms")) o.arms = arms;
  if (app.count("--max-new")) o.max_new = max_new;
  o.bfloat16 = bench::decode_settings().bfloat16, o.threads = threads;
  return bench::greedy_check(path, o);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_rollout: plain vs adaptive speculative decoding"};
  bench::DecodeSettings& ds = bench::decode_settings();
  int64_t ceiling_context = 128;
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
  app.add_option("--selector-value", ds.selector_value,
                 "How the bandit values an arm's steps: throughput or median")
      ->capture_default_str();
  app.add_option("--exploration", ds.exploration,
                 "Which arm the bandit's exploration picks: uniform or weighted (by value)")
      ->capture_default_str();
  app.add_option("--catch-up-limit", ds.catch_up_limit,
                 "Pending pairs a request keeps for the drafter's catch-up (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--draft-confidence", ds.draft_confidence,
                 "Verify a drafter's node only when its path's drafter probability reaches this "
                 "(0: every node)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--reproducible", ds.reproducible,
                 "Sampled requests (--temperature > 0): draft and verify so that each request's "
                 "tokens are plain sampling's for its seed, as RLJob rollouts do (0: speculative "
                 "rejection sampling, the same distribution with other draws)")
      ->capture_default_str();
  app.add_option("--coupled-drafts", ds.coupled_drafts,
                 "Sampled requests' chains (--reproducible 1) and trees draft the drafter's own "
                 "race at the keys the target will draw with (0: the drafter's likeliest tokens)")
      ->capture_default_str();
  app.add_option("--coupling-noise", ds.coupling_noise,
                 "Coupled trees: the scale of the Gumbel noise by which the target is assumed to "
                 "differ from the drafter, in log-probability (smaller: deeper trees)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--plain-floor", ds.plain_floor,
                 "The bandit keeps a floor under plain decoding (confidence bounds; 0: plain is "
                 "one more epsilon-greedy arm)")
      ->capture_default_str();
  app.add_option("--epsilon", ds.epsilon, "The bandit's exploration rate")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--dtype", decode_dtype,
                 "Decoding's matrix products: float32, bfloat16, or auto (bfloat16 for --model on "
                 "hardware with native bfloat16, as spec.model.dtype decides for a job)")
      ->check(CLI::IsMember({"auto", "float32", "bfloat16"}))
      ->capture_default_str();
  app.add_flag(
      "--show-bandit", ds.show_bandit,
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

  ds.bfloat16 = model::use_bfloat16(decode_dtype, !model_path.empty(), torch::kCPU);
  std::printf("cpu: %s\ndecoding: %s products (--dtype %s)\n",
              runtime::describe(runtime::cpu_info()).c_str(), ds.bfloat16 ? "bfloat16" : "float32",
              decode_dtype.c_str());

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
      return bench::model_ceiling(model_path, batches, threads, ceiling_context);
    }
    if (greedy) return greedy_check(model_path, app, batches, arms, max_new, threads);
    // Shorter runs than a preset's: a forward of SmolLM2 costs ~10x the small preset's.
    if (app.count("--max-new") == 0) max_new = 128;
    if (app.count("--waves") == 0) waves = 2;
    bench::ModelDrafter d;
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
    bench::Table table{batches,  fixed,          arms,  arms_s,  threads, max_new,
                       shortcut, warmup_batches, waves, repeats, group,   temperature};
    return bench::model_compare(model_path, table, d, temps, prepare_only, ceiling_context);
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
  bench::Table table{batches,  fixed,          arms,  arms_s,  threads, max_new,
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
  bench::print_ceiling(target, batches, 32 + max_new / 2);
  if (ceiling_only) return 0;
  std::vector<bench::SummaryRow> summary;
  int lost = bench::compare(
      target, {{"last", drafter}}, table,
      [&](int n, int offset) { return prompts(held, n, max_new, temperature, offset, group); },
      &summary);
  if (lost > 0) std::printf("%d runs differ from plain decoding: not lossless\n", lost);
  return lost == 0 ? 0 : 1;
}
