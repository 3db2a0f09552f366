#include "runtime/data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tlt::data {
namespace fs = std::filesystem;

Tokenizer::Tokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

StatusOr<Tokenizer> Tokenizer::load(const std::string& model_path) {
  Tokenizer t;
  auto st = t.sp_->Load(model_path);
  if (!st.ok()) {
    return Status::Corruption(model_path + ": not a sentencepiece model (" + st.ToString() +
                              "); delete it to retrain");
  }
  return t;
}

StatusOr<Tokenizer> Tokenizer::load_or_train(const std::string& model_path,
                                             const std::vector<Document>& docs, int vocab_size) {
  std::error_code ec;
  if (fs::exists(model_path, ec)) return load(model_path);
  fs::create_directories(fs::path(model_path).parent_path(), ec);
  std::string text_path = model_path + ".train.txt";
  {
    std::ofstream out(text_path, std::ios::trunc);
    if (!out) return Status::Unavailable(text_path + ": cannot write tokenizer training text");
    for (const Document& d : docs) out << d.text << "\n";
  }
  std::string prefix = model_path + ".tmp";
  std::string args = "--input=" + text_path + " --model_prefix=" + prefix +
                     " --vocab_size=" + std::to_string(vocab_size) +
                     " --model_type=bpe --character_coverage=1.0 --unk_id=0 --eos_id=1"
                     " --bos_id=-1 --pad_id=-1 --num_threads=2 --minloglevel=2"
                     " --max_sentence_length=16384 --split_digits=true";
  auto st = sentencepiece::SentencePieceTrainer::Train(args);
  std::remove(text_path.c_str());
  if (!st.ok()) return Status::Internal("training the tokenizer failed: " + st.ToString());
  fs::rename(prefix + ".model", model_path, ec);
  if (ec) return Status::Unavailable(model_path + ": " + ec.message());
  std::remove((prefix + ".vocab").c_str());
  return load(model_path);
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  sp_->Encode(text, &ids).IgnoreError();
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string s;
  sp_->Decode(ids, &s).IgnoreError();
  return s;
}

int Tokenizer::vocab_size() const {
  return sp_->GetPieceSize();
}
int Tokenizer::eos_id() const {
  return sp_->eos_id();
}

}  // namespace tlt::data
