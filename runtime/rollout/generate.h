// `tlt generate`: generate text from a preset or a checkpoint on this machine, plain or with
// speculative decoding, and print what it cost. No tokenizer is bundled yet, so text goes in
// and out byte by byte (token ids 0..255); ids above 255 print as <id>.
//
// Header free of LibTorch so the command line can include it cheaply.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::rollout {

struct GenerateOptions {
  std::string preset = "tiny";
  std::string checkpoint;          // model weights to load instead of random ones
  std::string drafter_checkpoint;  // drafter weights (speculation with EAGLE arms)
  std::string prompt = "Hello";
  int32_t max_tokens = 64;
  double temperature = 0.0;  // 0: greedy
  double top_p = 1.0;
  uint64_t seed = 0;
  int32_t copies = 1;  // the same prompt this many times (a batch)
  bool speculative = false;
  std::vector<std::string> arms{"4_1_5", "ngram"};
  // A real model (runtime/rollout/generate_pretrained.h): a GGUF file or a Hugging Face directory.
  // It brings its own tokenizer; `chat`, when set, is one user turn in the model's chat layout.
  std::string model;
  std::string chat;
  bool verbose = false;  // load time, peak RSS, the prompt's ids
  // --device: auto, cpu, cuda or cuda:N (runtime/device/device.h); the model, its KV cache and
  // the engine live there. Errors name "--device"; cuda never falls back to the CPU.
  std::string device = "auto";
};

// Runs generation and writes the device line ("device: cpu (this build has no CUDA)"), the
// outputs and a summary line to `out`.
// InvalidArgument for bad options; NotFound/Corruption for a bad checkpoint.
Status run_generate(const GenerateOptions& options, std::ostream& out);

}  // namespace tlt::rollout
