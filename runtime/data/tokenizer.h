// A BPE tokenizer (sentencepiece), trained on a corpus's training documents once and cached.
//
// Thread safety: encode/decode are const and safe from several threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/status.h"
#include "runtime/data/corpus.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tlt::data {

class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Loads `model_path`, or trains a BPE model of `vocab_size` on `docs` and saves it there
  // first (a temporary file is renamed into place, so a crash leaves no half model).
  static StatusOr<Tokenizer> load_or_train(const std::string& model_path,
                                           const std::vector<Document>& docs, int vocab_size);
  static StatusOr<Tokenizer> load(const std::string& model_path);

  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  int vocab_size() const;
  int eos_id() const;  // appended after every document

 private:
  Tokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace tlt::data
