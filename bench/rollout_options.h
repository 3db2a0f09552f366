// bench_rollout's options: everything its flags set, in one struct that main hands to the
// benchmark it runs (the preset's tables, rollout_preset.h; a real model's ceilings, training
// costs and tables, rollout_model.h; the greedy check, rollout_lossless.h). Nothing else holds
// state: each benchmark reads what it needs from here.
//
// Thread safety: plain values; parse_rollout_flags is called once, by main.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/rollout_compare.h"

namespace tlt::bench {

// How the measured drafters are warm-started on the target's own generations
// (rollout_drafter.h: rl::load_or_train_drafter_on_generations, cached), and what they are.
struct DrafterOptions {
  int steps = 400;    // --drafter-steps; --model: 1600 unless given
  int vocab = 0;      // --drafter-vocab: K most generated tokens (0: all); --model: 2048
  int prompts = 384;  // --drafter-prompts: problems the target answers; a preset: 64 unless given
  int levels = 3;     // --drafter-levels: drafting levels the training unrolls
  int layers = 1;     // --drafter-layers
  // --drafter-temperature: the warm start's sampling; -1 on the command line resolves to the first
  // sampled temperature measured, or 1 when all are 0 (as an RLJob's warm start samples at the
  // job's).
  double temperature = 1.0;
  std::vector<std::string> features{"last"};  // --drafter-features: the drafters measured
};

// What one bench_rollout process runs, resolved: per-mode defaults applied (a --model run's
// --max-new 128, --waves 2, arms and drafter; --ceiling-only's and --greedy-check's batches; a
// preset's --drafter-prompts).
struct RolloutOptions {
  std::string tokens;      // --tokens: the preset's tokenized corpus
  std::string model_path;  // --model: a llama/qwen2 GGUF file or Hugging Face directory
  std::string preset = "small";
  int train_steps = 400;  // the preset target's training steps (cached)
  bool prepare_only = false, ceiling_only = false, greedy_check = false;
  int64_t ceiling_context = 128;  // --model: tokens cached per request for the ceiling's forwards
  std::string dtype = "auto";     // --dtype as given; table.decode.bfloat16 is its resolution
  // --device as given (auto, cpu, cuda, cuda:N), and where the target, its KV caches, the
  // drafters and the engines live: "cpu" or "cuda:K" (runtime/device/device.h), with the line
  // main prints ("device: cuda:0 (NVIDIA H100 80GB HBM3)").
  std::string device_request = "auto", device = "cpu", device_line;
  Table table;  // batch sizes, arms, decoding settings
  DrafterOptions drafter;
  std::vector<double>
      temperatures;  // one table each (--temperature's alone unless --model gives more)
};

// Parses argv into *o and resolves --device against this build and machine. Returns -1 when the
// run should go on, else the process's exit code: 0 after --help, 2 (with a message on stderr)
// for a malformed or misplaced flag, or a --device this build or machine does not have (cuda
// never falls back to the CPU).
int parse_rollout_flags(int argc, char** argv, RolloutOptions* o);

}  // namespace tlt::bench
