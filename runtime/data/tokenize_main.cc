// `tlt-data`: turns a corpus into a cached tokenized corpus, in its own process (see
// runtime/data/token_file.h for why the tokenizer never shares a process with LibTorch).
//
//   tlt-data tokenize --corpus sotu --vocab 4096 --held-out 0.05 --tokenizer T.model --out F
//   tlt-data tokenize --corpus sotu --hf-tokenizer PATH --out F
// PATH: a model's own tokenizer (runtime/tokenizer/hf_tokenizer.h: a tokenizer.json, a Hugging
// Face directory or a GGUF file); documents end with its first end-of-text id.
#include <iostream>

#include <CLI/CLI.hpp>

#include "runtime/data/corpus.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"
#include "runtime/tokenizer/hf_tokenizer.h"

namespace {

// Every document's ids under a model's own tokenizer, each ending with its end-of-text id.
tlt::StatusOr<tlt::data::TokenizedCorpus> tokenize_hf(
    const std::string& source, const std::vector<tlt::data::Document>& docs) {
  auto tok = tlt::tokenizer::load_tokenizer(source);
  if (!tok.ok()) return tok.status();
  if ((*tok)->end_ids().empty()) {
    return tlt::Status::InvalidArgument(source +
                                        ": the tokenizer has no end-of-text token (eos_token) to "
                                        "end documents with");
  }
  tlt::data::TokenizedCorpus tc;
  tc.vocab = int32_t((*tok)->vocab_size());
  tc.eos_id = int32_t((*tok)->end_ids()[0]);
  for (const tlt::data::Document& d : docs) {
    auto ids = (*tok)->encode(d.text);
    if (!ids.ok()) return ids.status().with_context(d.name);
    tlt::data::TokenizedDocument td{d.name, std::vector<int32_t>(ids->begin(), ids->end())};
    td.ids.push_back(tc.eos_id);
    tc.docs.push_back(std::move(td));
  }
  return tc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tlt-data: corpora and tokenizers for tlt"};
  app.require_subcommand(1);
  std::string corpus = "sotu", tokenizer, hf_tokenizer, out;
  std::vector<std::string> paths;
  int vocab = 4096;
  double held_out = 0.05;
  CLI::App* tok = app.add_subcommand("tokenize", "Train (or load) a BPE tokenizer and tokenize");
  tok->add_option("--corpus", corpus, "sotu or files")->capture_default_str();
  tok->add_option("--paths", paths, "Text files when --corpus files");
  tok->add_option("--vocab", vocab, "Vocabulary size")->capture_default_str();
  tok->add_option("--held-out", held_out, "Held-out fraction (not used to train the tokenizer)");
  CLI::Option* sp =
      tok->add_option("--tokenizer", tokenizer, "sentencepiece model path (trained if missing)");
  tok->add_option("--hf-tokenizer", hf_tokenizer,
                  "A model's own tokenizer: tokenizer.json, Hugging Face directory or GGUF file")
      ->excludes(sp);
  tok->add_option("--out", out, "Token file to write")->required();
  CLI11_PARSE(app, argc, argv);

  auto docs = tlt::data::load_corpus(corpus, paths);
  if (!docs.ok()) {
    std::cerr << "tlt-data: " << docs.status().message() << "\n";
    return 1;
  }
  if (tokenizer.empty() == hf_tokenizer.empty()) {
    std::cerr << "tlt-data: give --tokenizer or --hf-tokenizer\n";
    return 1;
  }
  tlt::data::TokenizedCorpus tc;
  if (!hf_tokenizer.empty()) {
    auto hf = tokenize_hf(hf_tokenizer, *docs);
    if (!hf.ok()) {
      std::cerr << "tlt-data: " << hf.status().message() << "\n";
      return 1;
    }
    tc = std::move(*hf);
  } else {
    std::vector<tlt::data::Document> train, held;
    tlt::data::split_documents(*docs, held_out, &train, &held);
    auto t = tlt::data::Tokenizer::load_or_train(tokenizer, train, vocab);
    if (!t.ok()) {
      std::cerr << "tlt-data: " << t.status().message() << "\n";
      return 1;
    }
    tc.vocab = t->vocab_size();
    tc.eos_id = t->eos_id();
    for (const tlt::data::Document& d : *docs) {
      std::vector<int> ids = t->encode(d.text);
      tlt::data::TokenizedDocument td{d.name, std::vector<int32_t>(ids.begin(), ids.end())};
      td.ids.push_back(tc.eos_id);
      tc.docs.push_back(std::move(td));
    }
  }
  size_t n_tokens = 0;
  for (const tlt::data::TokenizedDocument& d : tc.docs) n_tokens += d.ids.size();
  tlt::Status st = tlt::data::write_token_file(out, tc);
  if (!st.ok()) {
    std::cerr << "tlt-data: " << st.message() << "\n";
    return 1;
  }
  std::cout << "tlt-data: " << tc.docs.size() << " documents, " << n_tokens << " tokens, vocab "
            << tc.vocab << " -> " << out << "\n";
  return 0;
}
