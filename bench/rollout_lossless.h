// bench_rollout --model PATH --greedy-check: greedy exactness on a real model at the precision
// decoding chooses on this CPU. For each batch size, the task's held-out prompts decode plainly
// and with each arm alone (a seeded, untrained drafter: drafter arms still verify the n-gram
// copies the engine stands in for their drafts), greedily, with the same engine options; every
// response must equal plain decoding's token for token. Prints per batch size and arm the tokens
// compared, the speculative steps, the accepted drafts and the products' precision and padding
// (runtime/model/bfloat16_probe.h); bench_rollout's main prints the CPU first.
//
// Thread safety: one call per process (it configures LibTorch's threads).
#pragma once

#include <string>
#include <vector>

namespace tlt::bench {

struct GreedyCheckOptions {
  std::vector<int> batches{1, 4, 16};
  std::vector<std::string> arms{"4_1_5", "4_2_8", "ngram"};
  int max_new = 24;            // tokens per response
  bool bfloat16 = true;        // decoding's products (--dtype resolved)
  int threads = 1;             // LibTorch's intra-op threads
  int64_t max_seq = 512;       // positions per request
  std::string device = "cpu";  // the model and the engines: "cpu" or "cuda:K" (resolved --device)
};

// Runs the check on the model at `path` (a llama/qwen2 GGUF file or Hugging Face directory with a
// tokenizer). The process's exit code: 0 when every response equals plain decoding's, 1 when one
// differs (the first difference is printed), 2 when the model, its tokenizer or an arm cannot be
// used.
int greedy_check(const std::string& path, const GreedyCheckOptions& options);

}  // namespace tlt::bench
