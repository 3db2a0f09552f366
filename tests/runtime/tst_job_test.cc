// A TSTPretrainJob's set-up (runtime/tst/job_setup.h, job_corpus.h, local_workers.h) without
// tokenizing or training: the tokenizer each data spec names, the run plan of each label, the
// documents read from a cached token file and split by name, and the local workers' wait.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "runtime/data/token_file.h"
#include "runtime/tst/job_setup.h"

namespace tlt::tst {
namespace {
namespace fs = std::filesystem;

// A cache directory of its own (TLT_CACHE) for one test, removed after it.
class TempCache {
 public:
  TempCache() : dir_(fs::temp_directory_path() / ("tlt-tst-job-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_ / "corpora");
    const char* old = std::getenv("TLT_CACHE");
    old_ = old ? old : "";
    setenv("TLT_CACHE", dir_.c_str(), 1);
  }
  ~TempCache() {
    if (old_.empty())
      unsetenv("TLT_CACHE");
    else
      setenv("TLT_CACHE", old_.c_str(), 1);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path corpus_file(const std::string& key) const {
    return dir_ / "corpora" / (key + ".tokens");
  }

 private:
  fs::path dir_;
  std::string old_;
};

TEST(TSTJob, DataTokenizerIsTheGivenPathOrNone) {
  api::TSTPretrainJobSpec spec;
  StatusOr<DataTokenizer> none = data_tokenizer(spec);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->path, "");
  EXPECT_FALSE(none->hf);
  spec.data.tokenizer.path = "/models/x/tokenizer.json";
  EXPECT_TRUE(data_tokenizer(spec)->hf);
  spec.data.tokenizer.path = "/models/x/spm.model";
  EXPECT_FALSE(data_tokenizer(spec)->hf);
  EXPECT_EQ(data_tokenizer(spec)->path, "/models/x/spm.model");
}

TEST(TSTJob, RunPlanTakesTheSpecAndItsLabel) {
  api::TSTPretrainJobSpec spec;
  spec.training.steps = 7, spec.training.seed = 3, spec.training.batch_size = 5;
  spec.checkpoint.path = "/ckpt";
  RunPlan tst = run_plan(spec, 123, "tst", true, true);
  EXPECT_EQ(tst.vocab, 123);
  EXPECT_EQ(tst.steps, 7);
  EXPECT_EQ(tst.seed, 3u);
  EXPECT_EQ(tst.batch, 5);
  EXPECT_EQ(tst.superposition, spec.superposition.enabled);
  EXPECT_TRUE(tst.resume);
  EXPECT_EQ(tst.checkpoint_dir, "/ckpt/tst");
  EXPECT_EQ(tst.tokenizer_source, "");  // a BPE trained on the corpus is not a model's own
  RunPlan base = run_plan(spec, 123, "baseline", false, false);
  EXPECT_FALSE(base.superposition);
  EXPECT_FALSE(base.resume);
  EXPECT_EQ(base.checkpoint_dir, "/ckpt/baseline");
  spec.checkpoint.path = "";
  EXPECT_EQ(run_plan(spec, 123, "tst", true, false).checkpoint_dir, "");  // no checkpoints
}

TEST(TSTJob, DocumentsComeFromTheCacheSplitByName) {
  TempCache cache;
  api::TSTPretrainJobSpec spec;
  spec.data.corpus = "sotu", spec.data.tokenizer.vocab_size = 4096;
  spec.data.held_out_fraction = 0.5;
  data::TokenizedCorpus corpus;
  corpus.vocab = 4096, corpus.eos_id = 1;
  size_t n_held = 0;
  for (int i = 0; i < 20; ++i) {
    std::string name = "doc" + std::to_string(i);
    corpus.docs.push_back({name, {2, int32_t(i + 3), 1}});
    n_held += data::held_out_by_name(name, 0.5);
  }
  ASSERT_GT(n_held, 0u);
  ASSERT_LT(n_held, 20u);
  // The key job_corpus.cc gives this spec: corpus, BPE vocabulary, held-out fraction.
  ASSERT_TRUE(data::write_token_file(cache.corpus_file("sotu-bpe4096-h0.5"), corpus).ok());
  std::ostringstream out;
  StatusOr<JobDocuments> docs = job_documents(spec, out);
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  EXPECT_EQ(docs->vocab, 4096);
  EXPECT_EQ(docs->held_out.size(), n_held);
  EXPECT_EQ(docs->train.size(), 20 - n_held);
  EXPECT_EQ(
      out.str().rfind("tlt run: corpus sotu: " + std::to_string(20 - n_held) + " training", 0), 0u)
      << out.str();

  spec.data.held_out_fraction = 0;  // holds out nothing: refused, saying what to raise
  ASSERT_TRUE(data::write_token_file(cache.corpus_file("sotu-bpe4096-h0"), corpus).ok());
  StatusOr<JobDocuments> none = job_documents(spec, out);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("spec.data.heldOutFraction"), std::string::npos);
}

TEST(TSTJob, NoLocalWorkersFinishAtOnce) {
  LocalWorkers workers;
  EXPECT_EQ(workers.wait(1), "");
}

}  // namespace
}  // namespace tlt::tst
