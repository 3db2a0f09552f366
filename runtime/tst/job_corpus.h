// The data of a TSTPretrainJob: which tokenizer reads its corpus, the tokenized corpus in the
// cache, and its training and held-out documents.
//
// The corpus is tokenized by the tlt-data binary beside the running one, never in this process:
// sentencepiece and LibTorch cannot share a process (runtime/data/token_file.h). This file only
// starts that binary and reads the token file it writes; it links no tokenizer and no LibTorch.
// A tokenized corpus is cached under data::cache_root() keyed by corpus, paths, tokenizer and
// held-out fraction, so the same inputs give the same ids on every run.
//
// Thread safety: none needed; the functions share no state (tokenized_corpus_file writes the
// cache, so two processes tokenizing the same corpus at once may both run tlt-data).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "api/spec.h"
#include "api/status.h"

namespace tlt::tst {

// The tokenizer of a TSTPretrainJob's data: spec.data.tokenizer.path when given (a path ending in
// .json is a Hugging Face tokenizer.json, anything else a sentencepiece model); else the model's
// own when spec.model.path names one with a tokenizer (model_source.h; a GGUF without one is
// InvalidArgument); else none (path "": a BPE of spec.data.tokenizer.vocabSize is trained on the
// corpus and cached). Errors of resolve_model_source and model_tokenizer_source, prefixed with
// spec.model.path.
struct DataTokenizer {
  std::string path;
  bool hf = false;  // a model's own tokenizer (tokenizer.json, HF directory or GGUF)
};
StatusOr<DataTokenizer> data_tokenizer(const api::TSTPretrainJobSpec& spec);

// The path of spec.data's tokenized corpus in the cache, made first (by the tlt-data binary
// beside the running one, with a progress line on `out`) when missing. Errors of
// data_tokenizer; Unavailable when tlt-data fails.
StatusOr<std::string> tokenized_corpus_file(const api::TSTPretrainJobSpec& spec, std::ostream& out);

// A job's documents, each a list of token ids ending with the end-of-document id, split by
// name into training and held-out documents (data::held_out_by_name with
// spec.data.heldOutFraction).
struct JobDocuments {
  std::vector<std::vector<int32_t>> train, held_out;
  int vocab = 0;  // the tokenizer's vocabulary size
};

// The job's documents from its tokenized corpus (tokenized_corpus_file, made when missing),
// with one line on `out` counting them. Errors of tokenized_corpus_file and
// data::read_token_file; InvalidArgument when the split holds out no document.
StatusOr<JobDocuments> job_documents(const api::TSTPretrainJobSpec& spec, std::ostream& out);

}  // namespace tlt::tst
