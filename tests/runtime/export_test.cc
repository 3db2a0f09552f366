// A TSTPretrainJob from spec.model.path and `tlt export` of what TST and RL write: the exported
// Hugging Face directory reads back into our model with the same logits, and Hugging Face
// transformers (tests/models/check_export.py under ~/.cache/tlt/venv-hf) computes logits within
// 1e-4 relative of ours. Bad inputs are errors that name what to fix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "runtime/model/checkpoint.h"
#include "runtime/model/hf_export.h"
#include "runtime/model/pretrained.h"
#include "runtime/model/safetensors.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/sequences.h"
#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/tst/run.h"
#include "runtime/tst/trainer.h"
#include "tests/runtime/model_fixtures.h"

namespace tlt::model {
namespace {

namespace fs = std::filesystem;
const std::string& kFixtures = testing::kModelFixtures;

// An empty scratch directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("tlt-export-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Two rows of 12 token ids below `vocab` (a fixed pattern), (2, 12).
torch::Tensor probe_tokens(int64_t vocab) {
  return torch::arange(24, torch::kInt64).mul(7).remainder(vocab).view({2, 12});
}

// Logits (B, T, V) of the model on `tokens` (B, T).
torch::Tensor probe_logits(Transformer& m, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  m->eval();
  torch::Tensor pos = torch::arange(tokens.size(1), torch::kInt64).expand_as(tokens);  // (B, T)
  return m->forward(tokens, pos).logits;                                               // (B, T, V)
}

Transformer load(const std::string& path) {
  StatusOr<ModelSource> s = resolve_model_source(path, "auto");
  EXPECT_TRUE(s.ok()) << s.status().message();
  StatusOr<SourcedModel> m = load_model(*s);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m->model;
}

// Runs check_export.py on `hf_dir` against our logits; skipped without the venv.
void expect_transformers_agree(const fs::path& hf_dir, const torch::Tensor& tokens,
                               const torch::Tensor& logits, const std::string& text = "") {
  std::string py = testing::tlt_cache("venv-hf/bin/python");
  if (const char* v = std::getenv("TLT_VENV_HF")) py = std::string(v) + "/bin/python";
  if (::access(py.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "no " << py << " (scripts/setup.sh makes it): transformers not checked";
  }
  nlohmann::json ref;
  torch::Tensor t = tokens.contiguous(), l = logits.to(torch::kFloat64).contiguous();
  for (int64_t b = 0; b < t.size(0); ++b) {
    ref["tokens"].push_back(
        std::vector<int64_t>(t[b].data_ptr<int64_t>(), t[b].data_ptr<int64_t>() + t.size(1)));
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t i = 0; i < l.size(1); ++i)
      rows.push_back(
          std::vector<double>(l[b][i].data_ptr<double>(), l[b][i].data_ptr<double>() + l.size(2)));
    ref["logits"].push_back(rows);
  }
  if (!text.empty()) {
    StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::load_tokenizer(hf_dir);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    StatusOr<std::vector<int64_t>> ids = (*tok)->encode(text);
    ASSERT_TRUE(ids.ok());
    ref["text"] = text, ref["text_ids"] = *ids;
  }
  fs::path ref_path = hf_dir.parent_path() / "reference.json";
  std::ofstream(ref_path) << ref.dump();
  std::string cmd = "'" + py + "' '" + std::string(TLT_SOURCE_DIR) +
                    "/tests/models/check_export.py' '" + hf_dir.string() + "' '" +
                    ref_path.string() + "' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Documents of ids in [2, vocab) ending with id 1, for a tiny model.
std::vector<std::vector<int32_t>> random_docs(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> docs(n);
  for (auto& d : docs) {
    for (int i = 0; i < 300; ++i) d.push_back(int32_t(2 + (i * 5 + rng() % 3) % (vocab - 2)));
    d.push_back(1);
  }
  return docs;
}

tst::RunPlan tiny_plan(const std::string& model_path, const fs::path& checkpoint_dir) {
  tst::RunPlan p;
  p.model_path = model_path, p.tokenizer_source = model_path, p.vocab = 64;
  p.steps = 6, p.warmup = 1, p.batch = 4, p.positions = 16, p.eval_every = 0, p.eval_batches = 1;
  p.bag = 2, p.ratio = 0.5, p.learning_rate = 1e-2;
  p.checkpoint_dir = checkpoint_dir.string();
  return p;
}

TEST(Export, TstCheckpointOfTiedQwen2MatchesTransformers) {
  TempDir tmp;
  std::string source = kFixtures + "/tiny-qwen2-hf";
  tst::RunPlan plan = tiny_plan(source, tmp.path / "ckpt" / "tst");
  auto pts = tst::run_pretraining(plan, random_docs(12, 64, 1), random_docs(2, 64, 2),
                                  [](const tst::Point&) {});
  ASSERT_TRUE(pts.ok()) << pts.status().message();
  StatusOr<ExportResult> r =
      export_to_hf((tmp.path / "ckpt").string(), "auto", (tmp.path / "hf").string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->tokenizer_note.empty());
  EXPECT_TRUE(fs::exists(tmp.path / "hf" / "tokenizer.json"));
  StatusOr<SafetensorsFile> st = open_safetensors((tmp.path / "hf" / "model.safetensors").string());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->find("lm_head.weight"), nullptr) << "a tied head is not written";

  torch::Tensor tokens = probe_tokens(64);  // (2, 12)
  Transformer trained = load((tmp.path / "ckpt").string());
  Transformer exported = load((tmp.path / "hf").string());
  Transformer original = load(source);
  torch::Tensor ours = probe_logits(trained, tokens);  // (2, 12, 64)
  double roundtrip = (probe_logits(exported, tokens) - ours).abs().max().item<double>();
  double moved = (probe_logits(original, tokens) - ours).abs().max().item<double>();
  std::cout << "export roundtrip maxdiff " << roundtrip << "; training moved logits by " << moved
            << "\n";
  EXPECT_EQ(roundtrip, 0.0);
  EXPECT_GT(moved, 1e-3) << "the checkpoint is the trained model, not the starting one";
  expect_transformers_agree(tmp.path / "hf", tokens, ours, "THE STATE, 1776.");
}

TEST(Export, RlPresetCheckpointWithoutCardMatchesTransformers) {
  TempDir tmp;
  StatusOr<ModelConfig> c = preset_config("micro", 128);
  ASSERT_TRUE(c.ok());
  torch::manual_seed(3);
  Transformer policy(*c);
  fs::create_directories(tmp.path / "rl" / "step-3");
  ASSERT_TRUE(
      save_checkpoint(*policy, (tmp.path / "rl/step-3/policy.ckpt").string(), "rl step 3").ok());
  std::ofstream(tmp.path / "rl" / "latest") << "step-3\n";
  StatusOr<ExportResult> r =
      export_to_hf((tmp.path / "rl").string(), "tlt", (tmp.path / "hf").string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->tokenizer_note.find("no tokenizer.json"), std::string::npos);
  torch::Tensor tokens = probe_tokens(128);  // (2, 12)
  torch::Tensor ours = probe_logits(policy, tokens);
  Transformer exported = load((tmp.path / "hf").string());
  EXPECT_EQ((probe_logits(exported, tokens) - ours).abs().max().item<double>(), 0.0);
  expect_transformers_agree(tmp.path / "hf", tokens, ours);
}

TEST(Export, BadSourcesAreNamedErrors) {
  TempDir tmp;
  StatusOr<ExportResult> missing =
      export_to_hf((tmp.path / "nope").string(), "auto", (tmp.path / "hf").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  ModelConfig odd;  // no preset has these shapes, and no model.json says what they are
  odd.vocab = 50, odd.dim = 24, odd.n_heads = 4, odd.n_kv_heads = 2, odd.n_layers = 1, odd.ffn = 40;
  Transformer m(odd);
  ASSERT_TRUE(save_checkpoint(*m, (tmp.path / "odd.ckpt").string(), "x").ok());
  StatusOr<ExportResult> r =
      export_to_hf((tmp.path / "odd.ckpt").string(), "auto", (tmp.path / "hf").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("matches no built-in preset"), std::string::npos)
      << r.status().message();
  StatusOr<ExportResult> wrong =
      export_to_hf(kFixtures + "/tiny-llama.gguf", "hf", (tmp.path / "hf").string());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("the format is hf"), std::string::npos);
}

TEST(TstFromModel, MismatchesAreRefusedBeforeTraining) {
  TempDir tmp;
  tst::RunPlan plan = tiny_plan(kFixtures + "/tiny-llama-hf", tmp.path / "ckpt");
  plan.vocab = 100;
  auto docs = random_docs(4, 64, 1);
  auto big = tst::run_pretraining(plan, docs, docs, [](const tst::Point&) {});
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("embedding has 64 rows"), std::string::npos)
      << big.status().message();
  plan.vocab = 64, plan.positions = 256;
  auto longer = tst::run_pretraining(plan, docs, docs, [](const tst::Point&) {});
  EXPECT_NE(longer.status().message().find("exceeds the model's context of 128"), std::string::npos)
      << longer.status().message();
  EXPECT_FALSE(fs::exists(tmp.path / "ckpt" / "model.ckpt"));
}

// A tied head and embedding are one matrix: AdamW's first step moves each entry by at most the
// learning rate (m/sqrt(v) = g/|g|). Stepped as two parameters, entries would move by up to 2x.
TEST(TstFromModel, TiedEmbeddingTakesOneAdamStep) {
  Transformer m = load(kFixtures + "/tiny-qwen2-hf");
  ASSERT_TRUE(m->config().tied_embeddings);
  torch::Tensor before = m->embed->weight.detach().clone();  // (V, C)
  tst::TrainerOptions o;
  o.schedule.steps = 1, o.schedule.warmup = 0, o.schedule.peak_lr = 1e-2;
  o.schedule.superposition = false, o.weight_decay = 0, o.batch = 4, o.positions = 16;
  o.eval_batches = 1;
  tst::TSTTrainer trainer(m, tst::PackedStream(random_docs(8, 64, 1), 1),
                          tst::PackedStream(random_docs(2, 64, 2), 2), o);
  tst::StepResult r = trainer.step();
  ASSERT_TRUE(trainer.status().ok());
  double moved = (m->embed->weight.detach() - before).abs().max().item<double>();
  std::cout << "lr " << r.lr << ", largest embedding change " << moved << "\n";
  EXPECT_LE(moved, r.lr * 1.001);
  EXPECT_GT(moved, r.lr * 0.5);
  EXPECT_TRUE(torch::equal(m->lm_head->weight, m->embed->weight));
}

// The RL trainer's update on a tied qwen2: the shared matrix takes one AdamW step (at most the
// learning rate per element in the first step; two steps would move it by up to twice that),
// and the LM head stays the embedding.
TEST(RlFromModel, TiedEmbeddingTakesOneAdamStep) {
  Transformer policy = load(kFixtures + "/tiny-qwen2-hf");
  Transformer reference = load(kFixtures + "/tiny-qwen2-hf");
  ASSERT_TRUE(policy->config().tied_embeddings);
  torch::Tensor before = policy->embed->weight.detach().clone();  // (V, C)
  rl::GrpoOptions o;
  o.learning_rate = 1e-2, o.minibatches = 1, o.kl_coef = 0.1;
  rl::PolicyTrainer trainer(policy, reference, o);
  std::mt19937 rng(3);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int i = 0; i < 4; ++i) {
    prompts.emplace_back(), responses.emplace_back();
    for (int t = 0; t < 6; ++t) prompts.back().push_back(int64_t(rng() % 64));
    for (int t = 0; t < 8; ++t) responses.back().push_back(int64_t(rng() % 64));
  }
  torch::Tensor adv = torch::tensor({1.0f, -1.0f, 0.5f, -0.5f});  // (B,)
  rl::UpdateStats st = trainer.update(rl::make_batch(prompts, responses), adv);
  double moved = (policy->embed->weight.detach() - before).abs().max().item<double>();
  std::cout << "loss " << st.loss << ", largest embedding change " << moved << "\n";
  EXPECT_LE(moved, o.learning_rate * 1.001);
  EXPECT_GT(moved, o.learning_rate * 0.5);
  EXPECT_TRUE(torch::equal(policy->lm_head->weight, policy->embed->weight));
}

}  // namespace
}  // namespace tlt::model
