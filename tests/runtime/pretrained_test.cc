// Real models in our Transformer: tiny random llama and qwen2 checkpoints in Hugging Face and GGUF
// formats against a numpy forward (tests/models/make_tiny_models.py), SmolLM2-135M-Instruct
// against the reference of tests/models/make_parity_fixture.py, both against Hugging Face
// `transformers` (tests/models/make_transformers_parity.py), and damaged checkpoints.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/model/pretrained.h"
#include "runtime/rollout/engine.h"
#include "runtime/rollout/generate_pretrained.h"
#include "runtime/tokenizer/hf_tokenizer.h"
#include "tests/runtime/model_fixtures.h"

namespace tlt::model {
namespace {

namespace fs = std::filesystem;
const std::string& kFixtures = testing::kModelFixtures;
using testing::read_bytes;

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A scratch copy of a fixture directory, removed at the end of the test.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& from) {
    path = fs::temp_directory_path() /
           ("tlt-pretrained-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::copy(from, path, fs::copy_options::recursive);
  }
  ~ScratchDir() { fs::remove_all(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

// Logits (1, T, V) of a whole-sequence forward.
torch::Tensor logits_of(Transformer& m, const std::vector<int64_t>& ids) {
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::tensor(ids, torch::kInt64).view({1, -1});  // (1, T)
  torch::Tensor pos = torch::arange(int64_t(ids.size()), torch::kInt64).view({1, -1});
  return m->forward(tokens, pos).logits;  // (1, T, V)
}

TEST(Pretrained, TinyModelsMatchNumpyReference) {
  nlohmann::json ref = nlohmann::json::parse(read_bytes(kFixtures + "/tiny-reference.json"));
  std::vector<int64_t> tokens = ref["tokens"].get<std::vector<int64_t>>();
  for (const char* name : {"llama-hf", "llama-gguf", "qwen2-hf", "qwen2-gguf"}) {
    std::string n = name;
    std::string path = kFixtures + "/tiny-" + n.substr(0, n.find('-')) +
                       (n.find("gguf") != std::string::npos ? ".gguf" : "-hf");
    StatusOr<PretrainedModel> m = load_pretrained(path);
    ASSERT_TRUE(m.ok()) << m.status().message();
    torch::Tensor got = logits_of(m->model, tokens)[0].to(torch::kFloat64);  // (T, V)
    auto rows = ref[n].get<std::vector<std::vector<double>>>();
    torch::Tensor want = torch::empty({int64_t(rows.size()), int64_t(rows[0].size())},
                                      torch::kFloat64);  // (T, V)
    for (size_t t = 0; t < rows.size(); ++t) {
      want[int64_t(t)] = torch::tensor(rows[t], torch::kFloat64);
    }
    double maxdiff = (got - want).abs().max().item<double>();
    double scale = want.abs().max().item<double>();
    std::printf("%-10s maxdiff=%.3g (max |logit| %.3g)\n", name, maxdiff, scale);
    EXPECT_LE(maxdiff, 1e-4 * scale) << name;
  }
}

TEST(Pretrained, TiedAndBiasedQwen2HasOneEmbeddingCopy) {
  StatusOr<PretrainedModel> m = load_pretrained(kFixtures + "/tiny-qwen2-hf");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.architecture, "qwen2");
  EXPECT_TRUE(m->model->layers[0]->as<DecoderLayerImpl>()->attn->wq->bias.defined());
  EXPECT_EQ(m->model->lm_head->weight.data_ptr(), m->model->embed->weight.data_ptr());
}

TEST(Pretrained, DamagedCheckpointsAreNamedErrors) {
  {  // unknown architecture
    ScratchDir d(kFixtures + "/tiny-llama-hf");
    nlohmann::json c = nlohmann::json::parse(read_bytes((d.path / "config.json").string()));
    c["model_type"] = "gemma";
    write_file(d.path / "config.json", c.dump());
    StatusOr<PretrainedModel> m = load_pretrained(d.path.string());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("\"gemma\""), std::string::npos) << m.status().message();
  }
  {  // a config that disagrees with the weights: the tensor and both shapes are named
    ScratchDir d(kFixtures + "/tiny-llama-hf");
    nlohmann::json c = nlohmann::json::parse(read_bytes((d.path / "config.json").string()));
    c["intermediate_size"] = 96;
    write_file(d.path / "config.json", c.dump());
    StatusOr<PretrainedModel> m = load_pretrained(d.path.string());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("mlp.gate_proj.weight has shape [64, 32]"),
              std::string::npos)
        << m.status().message();
  }
  {  // truncated safetensors
    ScratchDir d(kFixtures + "/tiny-llama-hf");
    std::string bytes = read_bytes((d.path / "model.safetensors").string());
    write_file(d.path / "model.safetensors", bytes.substr(0, bytes.size() - 100));
    StatusOr<PretrainedModel> m = load_pretrained(d.path.string());
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kCorruption);
    EXPECT_NE(m.status().message().find("model.safetensors"), std::string::npos);
  }
  {  // truncated GGUF
    fs::path p = fs::temp_directory_path() / ("tlt-cut-" + std::to_string(::getpid()) + ".gguf");
    std::string bytes = read_bytes(kFixtures + "/tiny-qwen2.gguf");
    write_file(p, bytes.substr(0, bytes.size() / 2));
    StatusOr<PretrainedModel> m = load_pretrained(p.string());
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kCorruption);
    EXPECT_NE(m.status().message().find(p.string()), std::string::npos) << m.status().message();
    fs::remove(p);
  }
  EXPECT_EQ(load_pretrained("/nonexistent/model.gguf").status().code(), StatusCode::kNotFound);
}

TEST(Pretrained, TokenizerLargerThanEmbeddingIsRefused) {
  ScratchDir d(kFixtures + "/tiny-llama-hf");
  nlohmann::json t = nlohmann::json::parse(read_bytes((d.path / "tokenizer.json").string()));
  for (int id = 64; id < 70; ++id) {  // six added tokens past the 64-row embedding
    t["added_tokens"].push_back({{"id", id},
                                 {"content", "<extra_" + std::to_string(id) + ">"},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  }
  write_file(d.path / "tokenizer.json", t.dump());
  rollout::GenerateOptions o;
  o.model = d.path.string();
  o.prompt = "!#";
  std::ostringstream out, log;
  Status st = rollout::run_generate_pretrained(o, out, log);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("vocabulary (70 tokens) is larger than the model's embedding (64"),
            std::string::npos)
      << st.message();
}

TEST(Pretrained, GenerateFromTinyModelStopsWithinBudget) {
  rollout::GenerateOptions o;
  o.model = kFixtures + "/tiny-qwen2-hf";
  o.prompt = "!#$%";
  o.max_tokens = 6;
  std::ostringstream out, log;
  Status st = rollout::run_generate_pretrained(o, out, log);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NE(log.str().find("generated="), std::string::npos) << log.str();
}

// ---- SmolLM2-135M-Instruct against its reference (skipped where the model is not fetched) ------

// The fixture names its reference: llama.cpp, or the numpy forward where llama-cpp-python could
// not be built (see tests/models/make_parity_fixture.py).
TEST(SmolLM2, LogitsAndGreedyContinuationsMatchReference) {
  if (!fs::exists(testing::smollm2_path())) {
    GTEST_SKIP() << testing::smollm2_path() << " is missing: scripts/setup.sh fetches SmolLM2";
  }
  StatusOr<PretrainedModel> m = load_pretrained(testing::smollm2_path());
  ASSERT_TRUE(m.ok()) << m.status().message();
  nlohmann::json ref = nlohmann::json::parse(read_bytes(kFixtures + "/smollm2-parity.json"));
  std::printf("reference: %s\n", ref["reference"].get<std::string>().c_str());
  for (const auto& p : ref["prompts"]) {
    std::vector<int64_t> ids = p["ids"].get<std::vector<int64_t>>();
    torch::Tensor logits = logits_of(m->model, ids)[0];  // (T, V)
    int64_t t = logits.size(0);
    double maxdiff = 0, scale = 0;
    for (size_t k = 0; k < p["positions"].size(); ++k) {
      const auto& pos = p["positions"][k];
      torch::Tensor row = logits[t - 3 + int64_t(k)].to(torch::kFloat64);  // (V)
      std::vector<int64_t> vid = pos["ids"].get<std::vector<int64_t>>();
      torch::Tensor got = row.index_select(0, torch::tensor(vid, torch::kInt64));
      torch::Tensor want = torch::tensor(pos["logits"].get<std::vector<double>>(), torch::kFloat64);
      maxdiff = std::max(maxdiff, (got - want).abs().max().item<double>());
      scale = std::max(scale, want.abs().max().item<double>());
    }
    std::vector<int64_t> greedy = p["greedy"].get<std::vector<int64_t>>();
    rollout::EngineOptions eo;
    eo.max_batch = 1;
    eo.max_seq = int64_t(ids.size() + greedy.size()) + 64;
    eo.speculative = false;
    auto engine = rollout::Engine::create(m->model, Drafter(nullptr), eo);
    ASSERT_TRUE(engine.ok());
    rollout::Request r;
    r.prompt = ids;
    r.max_new_tokens = int32_t(greedy.size());
    r.sampling = {/*temperature=*/0.0, /*top_p=*/1.0};  // greedy
    auto done = (*engine)->generate({r});
    ASSERT_TRUE(done.ok());
    std::printf("prompt of %zu tokens: maxdiff=%.3g (max |logit| %.3g, relative %.3g); greedy %s\n",
                ids.size(), maxdiff, scale, maxdiff / scale,
                (*done)[0].tokens == greedy ? "identical" : "DIFFERENT");
    EXPECT_LE(maxdiff, 1e-3 * scale);
    EXPECT_EQ((*done)[0].tokens, greedy);
  }
}

// ---- Against Hugging Face transformers (tests/models/make_transformers_parity.py) --------------

// Greedy continuation of `ids` by our rollout engine (KV cache, incremental decoding).
std::vector<int64_t> engine_greedy(Transformer& m, const std::vector<int64_t>& ids, size_t n) {
  rollout::EngineOptions eo;
  eo.max_batch = 1;
  eo.max_seq = int64_t(ids.size() + n) + 64;
  eo.speculative = false;
  auto engine = rollout::Engine::create(m, Drafter(nullptr), eo);
  EXPECT_TRUE(engine.ok());
  if (!engine.ok()) return {};
  rollout::Request r;
  r.prompt = ids;
  r.max_new_tokens = int32_t(n);
  r.sampling = {/*temperature=*/0.0, /*top_p=*/1.0};  // greedy
  auto done = (*engine)->generate({r});
  EXPECT_TRUE(done.ok());
  return done.ok() ? (*done)[0].tokens : std::vector<int64_t>{};
}

// Compares every prompt of a transformers fixture (logits at every position: the top 64 and 64
// random ids) with our forward, and the greedy continuations. The bound is the issue's: the
// largest difference within 1e-3 of the largest |logit| of the prompt.
void expect_matches_transformers(Transformer& m, const std::string& fixture,
                                 const std::string& label) {
  nlohmann::json ref = nlohmann::json::parse(read_bytes(kFixtures + "/" + fixture));
  std::printf("%s against %s\n", label.c_str(), ref["reference"].get<std::string>().c_str());
  ASSERT_EQ(ref["prompts"].size(), 3u);
  for (const auto& p : ref["prompts"]) {
    std::vector<int64_t> ids = p["ids"].get<std::vector<int64_t>>();
    torch::Tensor logits = logits_of(m, ids)[0].to(torch::kFloat64);  // (T, V)
    ASSERT_EQ(p["positions"].size(), ids.size());
    double maxdiff = 0, scale = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      const auto& pos = p["positions"][t];
      torch::Tensor vid = torch::tensor(pos["ids"].get<std::vector<int64_t>>(), torch::kInt64);
      torch::Tensor got = logits[int64_t(t)].index_select(0, vid);  // (128)
      torch::Tensor want = torch::tensor(pos["logits"].get<std::vector<double>>(), torch::kFloat64);
      maxdiff = std::max(maxdiff, (got - want).abs().max().item<double>());
      scale = std::max(scale, want.abs().max().item<double>());
    }
    std::vector<int64_t> greedy = p["greedy"].get<std::vector<int64_t>>();
    std::vector<int64_t> ours = engine_greedy(m, ids, greedy.size());
    std::printf(
        "  prompt of %zu tokens: maxdiff=%.3g (max |logit| %.3g, relative %.3g); greedy %zu "
        "tokens %s\n",
        ids.size(), maxdiff, scale, maxdiff / scale, greedy.size(),
        ours == greedy ? "identical" : "DIFFERENT");
    EXPECT_LE(maxdiff, 1e-3 * scale) << label;
    EXPECT_EQ(ours, greedy) << label;
  }
}

// A tiny random Qwen2 built and saved by transformers itself: its config.json and safetensors
// layout (not ours), Q/K/V biases, tied embeddings.
TEST(Transformers, TinyQwen2SavedByTransformersMatches) {
  StatusOr<PretrainedModel> m = load_pretrained(kFixtures + "/tiny-qwen2-transformers");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->config.config.qkv_bias);
  EXPECT_TRUE(m->config.config.tied_embeddings);
  expect_matches_transformers(m->model, "tiny-qwen2-transformers.json", "tiny-qwen2-transformers");
}

// SmolLM2-135M-Instruct from its Q4_1 GGUF (our dequantisation and Q/K un-permutation) against
// transformers on the float32 directory gguf_to_hf.py converted from the same file; our tokenizer
// built from the GGUF gives the ids transformers' tokenizer gave.
TEST(Transformers, SmolLM2GgufMatches) {
  if (!fs::exists(testing::smollm2_path())) {
    GTEST_SKIP() << testing::smollm2_path() << " is missing: scripts/setup.sh fetches SmolLM2";
  }
  StatusOr<PretrainedModel> m = load_pretrained(testing::smollm2_path());
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto tok = tokenizer::load_tokenizer(testing::smollm2_path());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  nlohmann::json ref = nlohmann::json::parse(read_bytes(kFixtures + "/smollm2-transformers.json"));
  for (const auto& p : ref["prompts"]) {
    auto ids = (*tok)->encode(p["text"].get<std::string>());
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, p["ids"].get<std::vector<int64_t>>()) << p["text"];
  }
  expect_matches_transformers(m->model, "smollm2-transformers.json", "SmolLM2 GGUF");
}

// The same from the Hugging Face directory (scripts/setup.sh converts it once).
TEST(Transformers, SmolLM2HfDirectoryMatches) {
  if (!fs::exists(testing::smollm2_hf_path() + "/config.json")) {
    GTEST_SKIP() << testing::smollm2_hf_path() << " is missing: scripts/setup.sh converts it";
  }
  StatusOr<PretrainedModel> m = load_pretrained(testing::smollm2_hf_path());
  ASSERT_TRUE(m.ok()) << m.status().message();
  expect_matches_transformers(m->model, "smollm2-transformers.json", "SmolLM2 HF directory");
}

}  // namespace
}  // namespace tlt::model
