// `tlt export`: a model (a tlt checkpoint that RL or TST wrote, or any source model_source.h
// resolves) written as a Hugging Face directory that `transformers` loads with
// AutoModelForCausalLM.from_pretrained:
//   config.json        LlamaForCausalLM or Qwen2ForCausalLM (hf_config_json), float32
//   model.safetensors  every parameter in float32 under its Hugging Face name; a tied LM head is
//                      left out (tie_word_embeddings: true), as transformers saves it
//   tokenizer.json     when the card names the model's tokenizer: copied from a tokenizer.json or
//                      a Hugging Face directory (with its generation_config.json), or built from
//                      a GGUF file's vocabulary
//   tokenizer_config.json  the source's, or one naming a GGUF's BOS/EOS tokens; with
//                      tokenizer_class PreTrainedTokenizerFast when it names none (else
//                      AutoTokenizer would add the model type's default special tokens)
// A model whose tokenizer is tlt's own (sentencepiece BPE, the RL codec) gets no tokenizer.json;
// the result says so. No LibTorch in this header (the `tlt` command line includes it).
//
// Thread safety: functions.
#pragma once

#include <string>
#include <vector>

#include "api/status.h"
#include "runtime/model/model_source.h"

namespace tlt::model {

struct ExportResult {
  std::vector<std::string> files;  // paths written, config.json first
  std::string tokenizer_note;      // why no tokenizer.json was written; "" when one was
};

// Loads the model at `path` (resolve_model_source with `format`, then load_model) and writes it
// into `dir` (created; files already there are replaced). The errors of resolving and loading;
// Unavailable when a file cannot be written; the tokenizer's errors (NotFound, InvalidArgument)
// name its source.
StatusOr<ExportResult> export_to_hf(const std::string& path, const std::string& format,
                                    const std::string& dir);

}  // namespace tlt::model
