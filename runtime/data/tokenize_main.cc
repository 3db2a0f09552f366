// `tlt-data`: turns a corpus into a cached tokenized corpus, in its own process (see
// runtime/data/token_file.h for why the tokenizer never shares a process with LibTorch).
//
//   tlt-data tokenize --corpus sotu --vocab 4096 --held-out 0.05 --tokenizer T.model --out F
#include <iostream>

#include <CLI/CLI.hpp>

#include "runtime/data/corpus.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"

int main(int argc, char** argv) {
  CLI::App app{"tlt-data: corpora and tokenizers for tlt"};
  app.require_subcommand(1);
  std::string corpus = "sotu", tokenizer, out;
  std::vector<std::string> paths;
  int vocab = 4096;
  double held_out = 0.05;
  CLI::App* tok = app.add_subcommand("tokenize", "Train (or load) a BPE tokenizer and tokenize");
  tok->add_option("--corpus", corpus, "sotu or files")->capture_default_str();
  tok->add_option("--paths", paths, "Text files when --corpus files");
  tok->add_option("--vocab", vocab, "Vocabulary size")->capture_default_str();
  tok->add_option("--held-out", held_out, "Held-out fraction (not used to train the tokenizer)");
  tok->add_option("--tokenizer", tokenizer, "Tokenizer model path (trained if missing)")
      ->required();
  tok->add_option("--out", out, "Token file to write")->required();
  CLI11_PARSE(app, argc, argv);

  auto docs = tlt::data::load_corpus(corpus, paths);
  if (!docs.ok()) {
    std::cerr << "tlt-data: " << docs.status().message() << "\n";
    return 1;
  }
  std::vector<tlt::data::Document> train, held;
  tlt::data::split_documents(*docs, held_out, &train, &held);
  auto t = tlt::data::Tokenizer::load_or_train(tokenizer, train, vocab);
  if (!t.ok()) {
    std::cerr << "tlt-data: " << t.status().message() << "\n";
    return 1;
  }
  tlt::data::TokenizedCorpus tc;
  tc.vocab = t->vocab_size();
  tc.eos_id = t->eos_id();
  size_t n_tokens = 0;
  for (const tlt::data::Document& d : *docs) {
    std::vector<int> ids = t->encode(d.text);
    tlt::data::TokenizedDocument td{d.name, std::vector<int32_t>(ids.begin(), ids.end())};
    td.ids.push_back(tc.eos_id);
    n_tokens += td.ids.size();
    tc.docs.push_back(std::move(td));
  }
  tlt::Status st = tlt::data::write_token_file(out, tc);
  if (!st.ok()) {
    std::cerr << "tlt-data: " << st.message() << "\n";
    return 1;
  }
  std::cout << "tlt-data: " << tc.docs.size() << " documents, " << n_tokens << " tokens, vocab "
            << tc.vocab << " -> " << out << "\n";
  return 0;
}
