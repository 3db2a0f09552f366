#include "bench/rollout_options.h"

#include <iostream>
#include <sstream>

#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "api/arm.h"
#include "api/spec.h"
#include "bench/rollout_lossless.h"
#include "runtime/device/device.h"
#include "runtime/model/precision.h"

namespace tlt::bench {

namespace {

// Flags held as text until parsed.
struct RawFlags {
  std::string batches = "1,4,16,64", fixed = "1,16", temperatures, features = "last";
  double drafter_temperature = -1;  // auto
};

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

// A comma-separated list of batch sizes ("" is empty); false at anything but positive integers.
bool parse_list(const std::string& s, std::vector<int>* v) {
  v->clear();
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) {
    if (x.empty() || x.size() > 6 || x.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(x) < 1)
      return false;
    v->push_back(std::stoi(x));
  }
  return true;
}

// What runs and on what: the modes, the preset's target, a real model's ceilings.
void add_run_flags(CLI::App& app, RolloutOptions* o) {
  app.add_option("--tokens", o->tokens, "Tokenized corpus (tlt-data tokenize); not with --model");
  app.add_option("--model", o->model_path,
                 "A llama/qwen2 GGUF file or Hugging Face directory: its ceilings, then plain vs "
                 "adaptive on arithmetic-cot's held-out prompts through its chat template, with a "
                 "drafter warm-started on its own generations (cached). Its defaults: --max-new "
                 "128 --waves 2 --drafter-steps 1600 --drafter-vocab 2048 (--ceiling-only: "
                 "--batches 1,4,16)");
  app.add_flag("--prepare-only", o->prepare_only,
               "Train and cache target and drafter (on all cores), then exit");
  app.add_flag("--ceiling-only", o->ceiling_only,
               "Print only the speculation ceiling per batch size (no decoding runs)");
  app.add_flag("--greedy-check", o->greedy_check,
               "--model: plain vs each arm alone, greedy, at each batch size (default 1,4,16, "
               "24 new tokens): exit 1 unless every response equals plain decoding's");
  app.add_option("--ceiling-context", o->ceiling_context,
                 "--model: tokens already in each request's KV cache for the ceiling's forward "
                 "times (a job's prompt plus response so far: attention grows with it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--preset", o->preset, "Target preset")->capture_default_str();
  app.add_option("--train-steps", o->train_steps, "Target training steps (cached)")
      ->capture_default_str();
  app.add_option("--dtype", o->dtype,
                 "Decoding's matrix products: float32, bfloat16, or auto (bfloat16 for --model on "
                 "hardware with native bfloat16, as spec.model.dtype decides for a job)")
      ->check(CLI::IsMember({"auto", "float32", "bfloat16"}))
      ->capture_default_str();
  app.add_option("--device", o->device_request,
                 "Where the target, its KV caches, the drafters and the engines run: auto (CUDA "
                 "when this build and machine have it), cpu, cuda or cuda:N; cuda without a GPU "
                 "fails at start (a preset's target trains on the CPU and moves there)")
      ->capture_default_str();
}

// How the drafters are warm-started (DrafterOptions).
void add_drafter_flags(CLI::App& app, RolloutOptions* o, RawFlags* raw) {
  DrafterOptions& d = o->drafter;
  app.add_option("--drafter-steps", d.steps,
                 "Drafter warm-start steps (cached; --model: 1600 unless given)")
      ->capture_default_str();
  app.add_option("--drafter-layers", d.layers, "The drafter's decoder layers (spec.drafter.layers)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  app.add_option("--drafter-temperature", raw->drafter_temperature,
                 "The temperature the drafter's warm start samples the target's answers at (as an "
                 "RLJob's warm start samples at the job's); -1: the first sampled temperature of "
                 "--temperature(s), or 1 when all are 0")
      ->capture_default_str();
  app.add_option("--drafter-prompts", d.prompts,
                 "Training problems (a preset: corpus windows) the target answers for its "
                 "drafter's warm start (cached per count; more give longer accepted drafts and a "
                 "longer first run; a preset: 64 unless given, spec.drafter.warmStartPrompts)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--drafter-levels", d.levels,
                 "Drafting levels the drafter's warm start unrolls in training (1: the target's "
                 "features only; cached per value)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  app.add_option("--drafter-features", raw->features,
                 "The drafter's features (spec.drafter.features): last, fused, or both (each "
                 "warm-started on the same generations, measured side by side)")
      ->check(CLI::IsMember({"last", "fused", "both"}))
      ->capture_default_str();
  app.add_option("--drafter-vocab", d.vocab,
                 "Draft over the this-many most frequent tokens of the target's generations (0: "
                 "all; --model: 2048 unless given)")
      ->capture_default_str();
}

// What each table measures: batch sizes, arms, requests, repetitions (Table).
void add_table_flags(CLI::App& app, RolloutOptions* o, RawFlags* raw) {
  Table& t = o->table;
  app.add_option("--arms", t.arms_s,
                 "The adaptive engine's arms (depth_topk_verifyTokens, ngram, ngram_D; --model: "
                 "2_1_3,4_1_5,4_2_8,6_3_16 unless given)")
      ->capture_default_str();
  app.add_option("--batches", raw->batches, "Batch sizes")->capture_default_str();
  app.add_option("--max-new", t.max_new, "Tokens per response")->capture_default_str();
  app.add_option("--threads", t.threads, "Compute threads (a worker owns one core)")
      ->capture_default_str();
  app.add_option("--temperature", t.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--temperatures", raw->temperatures,
                 "--model: comma-separated temperatures (e.g. 0,0.7,1), one table each and a "
                 "side-by-side summary; overrides --temperature");
  app.add_option("--ngram-shortcut", t.shortcut,
                 "Drafter arms copy drafts from context after a recurring n-gram this long "
                 "(0: off)")
      ->capture_default_str();
  app.add_option("--repeats", t.repeats,
                 "Plain and adaptive runs per batch size, alternating; the faster of each counts "
                 "(a shared machine's noise only ever slows a run)")
      ->capture_default_str();
  app.add_option("--group", t.group,
                 "Consecutive requests sharing a prompt (a GRPO group; the history arm drafts "
                 "from finished siblings)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--waves", t.waves,
                 "Measured batches of each size served one after another (batch 64: one)")
      ->capture_default_str();
  app.add_option("--warmup-batches", t.warmup_batches,
                 "Batches the engine serves before the measured one (its bandit learns)")
      ->capture_default_str();
  app.add_option("--fixed-batches", raw->fixed, "Batch sizes at which each arm also runs alone")
      ->capture_default_str();
}

// How every measured engine decodes (DecodeSettings).
void add_decode_flags(CLI::App& app, DecodeSettings* ds) {
  app.add_option("--selector-value", ds->selector_value,
                 "How the bandit values an arm's steps: throughput or median")
      ->capture_default_str();
  app.add_option("--exploration", ds->exploration,
                 "Which arm the bandit's exploration picks: uniform or weighted (by value)")
      ->capture_default_str();
  app.add_option("--catch-up-limit", ds->catch_up_limit,
                 "Pending pairs a request keeps for the drafter's catch-up (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--draft-confidence", ds->draft_confidence,
                 "Verify a drafter's node only when its path's drafter probability reaches this "
                 "(0: every node)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--reproducible", ds->reproducible,
                 "Sampled requests (--temperature > 0): draft and verify so that each request's "
                 "tokens are plain sampling's for its seed, as RLJob rollouts do (0: speculative "
                 "rejection sampling, the same distribution with other draws)")
      ->capture_default_str();
  app.add_option("--coupled-drafts", ds->coupled_drafts,
                 "Sampled requests' chains (--reproducible 1) and trees draft the drafter's own "
                 "race at the keys the target will draw with (0: the drafter's likeliest tokens)")
      ->capture_default_str();
  app.add_option("--coupling-noise", ds->coupling_noise,
                 "Coupled trees: the scale of the Gumbel noise by which the target is assumed to "
                 "differ from the drafter, in log-probability (smaller: deeper trees)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--plain-floor", ds->plain_floor,
                 "The bandit keeps a floor under plain decoding (confidence bounds; 0: plain is "
                 "one more epsilon-greedy arm)")
      ->capture_default_str();
  app.add_option("--epsilon", ds->epsilon, "The bandit's exploration rate")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_flag(
      "--show-bandit", ds->show_bandit,
      "Print the bandit's value (tok/s) of each arm (plain last; -1: never tried) per context");
}

// A --model run's defaults where its flags were not given.
void resolve_model(const CLI::App& app, RolloutOptions* o) {
  Table& t = o->table;
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  const GreedyCheckOptions greedy;
  if (o->ceiling_only && !given("--batches")) t.batches = {1, 4, 16};
  if (o->greedy_check) {  // GreedyCheckOptions' defaults where the flags are not given
    if (!given("--batches")) t.batches = greedy.batches;
    if (!given("--arms")) t.arms = greedy.arms;
    if (!given("--max-new")) t.max_new = greedy.max_new;
  }
  // Shorter runs than a preset's: a forward of SmolLM2 costs ~10x the small preset's.
  if (!o->greedy_check && !given("--max-new")) t.max_new = 128;
  if (!given("--waves")) t.waves = 2;
  if (!given("--drafter-steps")) o->drafter.steps = 1600;
  if (!given("--drafter-vocab")) o->drafter.vocab = 2048;
}

// The drafters and the temperatures measured, both modes. The exit code for a malformed flag, or
// -1.
int resolve_drafters(const RawFlags& raw, RolloutOptions* o) {
  o->drafter.features = raw.features == "both" ? std::vector<std::string>{"last", "fused"}
                                               : std::vector<std::string>{raw.features};
  o->temperatures = {o->table.temperature};
  if (!raw.temperatures.empty() && !parse_doubles(raw.temperatures, &o->temperatures)) {
    std::cerr << "--temperatures takes comma-separated temperatures >= 0 such as 0,0.7,1\n";
    return 2;
  }
  o->drafter.temperature = raw.drafter_temperature;
  if (o->drafter.temperature < 0) {  // auto: the first sampled temperature measured, else 1
    o->drafter.temperature = 1.0;
    for (double temp : o->temperatures) {
      if (temp > 0) {
        o->drafter.temperature = temp;
        break;
      }
    }
  }
  return -1;
}

// The batch sizes and arms, then the mode's defaults and checks. The exit code or -1.
int resolve(const CLI::App& app, const RawFlags& raw, RolloutOptions* o) {
  Table& t = o->table;
  // A real model's arms: short chains for the larger batches, longer chains and a coupled tree
  // for the small ones (docs/benchmarks.md measures each).
  if (!o->model_path.empty() && app.count("--arms") == 0) t.arms_s = "2_1_3,4_1_5,4_2_8,6_3_16";
  if (!parse_list(raw.batches, &t.batches) || !parse_list(raw.fixed, &t.fixed)) {
    std::cerr << "--batches and --fixed-batches take comma-separated positive batch sizes such "
                 "as 1,16 (--fixed-batches \"\" for none)\n";
    return 2;
  }
  t.arms.clear();
  std::stringstream arms(t.arms_s);
  for (std::string a; std::getline(arms, a, ',');) {
    api::Arm parsed;
    std::string why;
    if (!api::parse_arm(a, &parsed, &why)) {
      std::cerr << "--arms \"" << a << "\": " << why << "\n";
      return 2;
    }
    t.arms.push_back(a);
  }
  StatusOr<device::Placement> placement =
      device::resolve_device(o->device_request, device::probe_inventory(), "--device");
  if (!placement.ok()) {
    std::cerr << placement.status().message() << "\n";
    return 2;
  }
  o->device = placement->main_device(), o->device_line = placement->line();
  t.decode.bfloat16 =
      model::use_bfloat16(o->dtype, !o->model_path.empty(), torch::Device(o->device));
  if (!o->model_path.empty()) {
    resolve_model(app, o);
    return resolve_drafters(raw, o);
  }
  if (!raw.temperatures.empty()) {
    std::cerr << "--temperatures is for --model runs\n";
    return 2;
  }
  if (o->tokens.empty()) {
    std::cerr << "--tokens FILE is required (a tokenized corpus; bench/rollout.sh passes it), "
                 "or --model PATH\n";
    return 2;
  }
  // The answers an RLJob's warm start samples by default (spec.drafter.warmStartPrompts).
  if (app.count("--drafter-prompts") == 0)
    o->drafter.prompts = api::DrafterSpec().warm_start_prompts;
  return resolve_drafters(raw, o);
}

}  // namespace

int parse_rollout_flags(int argc, char** argv, RolloutOptions* o) {
  CLI::App app{"bench_rollout: plain vs adaptive speculative decoding"};
  o->table.arms_s = "4_1_5,6_1_7,4_2_8,ngram";
  RawFlags raw;
  add_run_flags(app, o);
  add_drafter_flags(app, o, &raw);
  add_table_flags(app, o, &raw);
  add_decode_flags(app, &o->table.decode);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return resolve(app, raw, o);
}

}  // namespace tlt::bench
