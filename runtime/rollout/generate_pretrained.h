// `tlt generate --model PATH`: a real llama or qwen2 model (a GGUF file or a Hugging Face
// directory, runtime/model/pretrained.h) with its own tokenizer (runtime/tokenizer), plain or in
// its chat layout, stopping on the model's end tokens.
//
// Header free of LibTorch so the command line can include it cheaply.
#pragma once

#include <iosfwd>

#include "api/status.h"
#include "runtime/rollout/generate.h"

namespace tlt::rollout {

// Loads options.model and its tokenizer, generates from options.chat (one user turn) or
// options.prompt, and writes the completion's text to `out`; a summary line (tokens, seconds,
// tokens/s, plain and speculative steps, accept length) and, with verbose, the load time and peak
// RSS go to `log`. With options.speculative only the drafter-free arms run (ngram, ngram_D); the
// tokens are plain decoding's either way. InvalidArgument when the tokenizer's vocabulary is
// larger than the model's embedding; the loaders' errors otherwise.
Status run_generate_pretrained(const GenerateOptions& options, std::ostream& out,
                               std::ostream& log);

// The process's peak resident set size in bytes (VmHWM), or 0 where /proc has none.
int64_t peak_rss_bytes();

}  // namespace tlt::rollout
