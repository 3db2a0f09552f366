// Tokenized corpora on disk: what `tlt-data tokenize` writes and `tlt run` reads.
//
// The tokenizer (sentencepiece) never shares a process with LibTorch: Debian's sentencepiece
// carries its own protobuf-lite while LibTorch links the full libprotobuf, and the two clash at
// start-up (a crash in protobuf's static initialisers). So a separate binary tokenizes once
// and caches the ids in this format: "TLTTOK1\n", then vocab, eos id, document count (int32
// each), then per document: name length (int32), name, token count (int32), tokens (int32),
// and a final FNV-1a 64 checksum of everything before it.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::data {

struct TokenizedDocument {
  std::string name;
  std::vector<int32_t> ids;  // ends with the end-of-document id
};

struct TokenizedCorpus {
  int32_t vocab = 0;
  int32_t eos_id = 0;
  std::vector<TokenizedDocument> docs;
};

Status write_token_file(const std::string& path, const TokenizedCorpus& corpus);
// NotFound when missing; Corruption when truncated or failing its checksum.
StatusOr<TokenizedCorpus> read_token_file(const std::string& path);

// Where tlt keeps what it downloads, builds or derives, outside the checkout: $TLT_CACHE, else
// ~/.cache/tlt (corpora/, tokenizers/, bench/ below it; data/ unless $TLT_DATA_DIR says else).
std::string cache_root();

// Same rule as split_documents() in corpus.h: held out when the name's hash falls in the
// first `fraction`.
bool held_out_by_name(const std::string& name, double fraction);

}  // namespace tlt::data
