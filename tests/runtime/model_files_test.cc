// GGUF and safetensors parsing, dequantisation and pretrained configs (no LibTorch): against the
// gguf package's own dequantiser (tests/models/make_tiny_models.py wrote the fixtures), and on
// damaged files, each of which must be a clear error naming the file and the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/model/gguf.h"
#include "runtime/model/pretrained_config.h"
#include "runtime/model/safetensors.h"
#include "tests/runtime/model_fixtures.h"

namespace tlt::model {
namespace {

const std::string& kFixtures = testing::kModelFixtures;
using testing::read_bytes;

StatusOr<GgufFile> parse(const std::string& bytes, const std::string& name = "test.gguf") {
  return parse_gguf(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
}

TEST(GgufQuant, EveryTypeMatchesTheGgufPackage) {
  StatusOr<GgufFile> f = open_gguf(kFixtures + "/quants.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  nlohmann::json ref = nlohmann::json::parse(read_bytes(kFixtures + "/quants-reference.json"));
  ASSERT_EQ(f->tensors.size(), ref.size());
  for (const GgufTensor& t : f->tensors) {
    std::vector<double> want = ref.at(t.name).get<std::vector<double>>();
    ASSERT_EQ(int64_t(want.size()), t.n_elements()) << t.name;
    std::vector<float> got(want.size());
    ASSERT_TRUE(dequantize(t.type, t.data, t.n_elements(), got.data()).ok()) << t.name;
    double maxdiff = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      maxdiff = std::max(maxdiff, std::abs(double(got[i]) - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    std::printf("%-5s n=%zu maxdiff=%.3g (max |x| %.3g)\n", t.name.c_str(), got.size(), maxdiff,
                scale);
    EXPECT_LE(maxdiff, 1e-6 * std::max(1.0, scale)) << t.name;
  }
}

TEST(Gguf, TinyLlamaHeaderAndConfig) {
  StatusOr<GgufFile> f = open_gguf(kFixtures + "/tiny-llama.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->version, 3u);
  const GgufTensor* q = f->tensor("blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->torch_shape(), (std::vector<int64_t>{32, 32}));
  StatusOr<PretrainedConfig> c = config_from_gguf(*f);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->config.n_layers, 2);
  EXPECT_EQ(c->config.n_kv_heads, 2);
  EXPECT_EQ(c->config.vocab, 64);
  EXPECT_FALSE(c->config.tied_embeddings);
  EXPECT_FALSE(c->config.qkv_bias);
  StatusOr<GgufFile> qf = open_gguf(kFixtures + "/tiny-qwen2.gguf");
  ASSERT_TRUE(qf.ok());
  StatusOr<PretrainedConfig> qc = config_from_gguf(*qf);
  ASSERT_TRUE(qc.ok()) << qc.status().message();
  EXPECT_TRUE(qc->config.tied_embeddings);
  EXPECT_TRUE(qc->config.qkv_bias);
  EXPECT_DOUBLE_EQ(qc->config.rope_theta, 1000000.0);
}

// Every cut of the file short of its end is an error that names the file; none crashes.
TEST(Gguf, TruncatedFileIsCorruptionNamingTheFile) {
  std::string bytes = read_bytes(kFixtures + "/tiny-llama.gguf");
  ASSERT_TRUE(parse(bytes).ok());
  size_t checked = 0;
  for (size_t cut = 0; cut < bytes.size(); cut += (cut < 4096 ? 1 : 997)) {
    StatusOr<GgufFile> f = parse(bytes.substr(0, cut), "cut.gguf");
    ASSERT_FALSE(f.ok()) << "cut at " << cut;
    EXPECT_NE(f.status().message().find("cut.gguf"), std::string::npos) << f.status().message();
    ++checked;
  }
  StatusOr<GgufFile> f = parse(bytes.substr(0, bytes.size() - 1), "short.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
  EXPECT_NE(f.status().message().find("truncated GGUF: tensor"), std::string::npos)
      << f.status().message();
  std::printf("checked %zu cuts; last: %s\n", checked, f.status().message().c_str());
}

// The type field of tensor `name` in the tensor table: after the name, n_dims, ne[].
size_t type_field_offset(const std::string& bytes, const std::string& name) {
  size_t at = bytes.rfind(name);  // the tensor table comes after the metadata
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, bytes.data() + at + name.size(), 4);
  return at + name.size() + 4 + 8 * n_dims;
}

TEST(Gguf, UnknownTensorTypeNamesTensorAndType) {
  std::string bytes = read_bytes(kFixtures + "/tiny-llama.gguf");
  size_t at = type_field_offset(bytes, "output_norm.weight");
  uint32_t type = 0;
  std::memcpy(&type, bytes.data() + at, 4);
  ASSERT_EQ(type, 0u);  // F32: the offset is right
  uint32_t bad = 11;    // Q3_K: a real ggml type tlt does not read
  std::memcpy(&bytes[at], &bad, 4);
  StatusOr<GgufFile> f = parse(bytes, "q3k.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = f.status().message();
  EXPECT_NE(m.find("q3k.gguf"), std::string::npos) << m;
  EXPECT_NE(m.find("output_norm.weight"), std::string::npos) << m;
  EXPECT_NE(m.find("ggml type 11"), std::string::npos) << m;
}

TEST(Gguf, BadMagicAndHugeCountsAreErrors) {
  EXPECT_EQ(parse("GGUX\x03\0\0\0").status().code(), StatusCode::kCorruption);
  std::string bytes = read_bytes(kFixtures + "/tiny-llama.gguf");
  uint64_t huge = uint64_t(1) << 60;
  std::memcpy(&bytes[16], &huge, 8);  // metadata_kv_count
  StatusOr<GgufFile> f = parse(bytes);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("metadata"), std::string::npos) << f.status().message();
}

// A safetensors file of one F32 tensor of `n` values whose header claims [begin, end).
std::string safetensors_bytes(uint64_t begin, uint64_t end, int n) {
  std::string header = R"({"w":{"dtype":"F32","shape":[)" + std::to_string(n) +
                       R"(],"data_offsets":[)" + std::to_string(begin) + "," + std::to_string(end) +
                       "]}}";
  uint64_t len = header.size();
  std::string out(reinterpret_cast<const char*>(&len), 8);
  return out + header + std::string(size_t(n) * 4, '\0');
}

TEST(Safetensors, OffsetsPastTheFileNameTensorAndFile) {
  std::string good = safetensors_bytes(0, 16, 4);
  auto parse_st = [](const std::string& b, const std::string& name) {
    return parse_safetensors(reinterpret_cast<const uint8_t*>(b.data()), b.size(), name);
  };
  StatusOr<SafetensorsFile> ok = parse_st(good, "good.safetensors");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->tensors.size(), 1u);
  std::string past = safetensors_bytes(0, 400, 4);
  StatusOr<SafetensorsFile> f = parse_st(past, "past.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
  const std::string& m = f.status().message();
  EXPECT_NE(m.find("past.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("tensor w"), std::string::npos) << m;
  EXPECT_NE(m.find("past the end"), std::string::npos) << m;
  EXPECT_FALSE(parse_st(good.substr(0, 20), "cut.safetensors").ok());
  EXPECT_FALSE(parse_st(safetensors_bytes(0, 12, 4), "short.safetensors").ok());
}

StatusOr<SafetensorsFile> parse_st(const std::string& bytes, size_t size, const std::string& name) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), size, name);
}

// A header length past the end of the file is refused before the header is read. The bytes
// given are a valid file's prefix inside a valid file's buffer, so a parser that trusted the
// length would read a whole header and hand out tensors past the end, not crash.
TEST(Safetensors, HeaderPastTheEndOfFileIsRefused) {
  std::string whole = safetensors_bytes(0, 16, 4);
  uint64_t header = 0;
  std::memcpy(&header, whole.data(), 8);
  for (size_t size : {size_t(8), size_t(8 + header - 1)}) {
    StatusOr<SafetensorsFile> f = parse_st(whole, size, "cut.safetensors");
    ASSERT_FALSE(f.ok()) << size << " bytes";
    EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
    const std::string& m = f.status().message();
    EXPECT_NE(m.find("cut.safetensors"), std::string::npos) << m;
    EXPECT_NE(m.find("header of " + std::to_string(header) + " bytes runs past the end"),
              std::string::npos)
        << m;
  }
  std::string huge = whole;  // a length whose 8 + N overflows
  uint64_t max = ~uint64_t(0);
  std::memcpy(&huge[0], &max, 8);
  EXPECT_EQ(parse_st(huge, huge.size(), "huge.safetensors").status().code(),
            StatusCode::kCorruption);
}

// data_offsets [BEGIN, END] with BEGIN > END: an error naming the field, not a span that wraps.
TEST(Safetensors, OffsetsBeginningAfterTheirEndAreRefused) {
  std::string bytes = safetensors_bytes(16, 0, 4);
  StatusOr<SafetensorsFile> f = parse_st(bytes, bytes.size(), "backwards.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
  const std::string& m = f.status().message();
  EXPECT_NE(m.find("backwards.safetensors: tensor w: data_offsets [16, 0] begin after their end"),
            std::string::npos)
      << m;
}

// The header must be a JSON object of tensors: an array, a string, a number or null is refused
// with what it is, and text that is not JSON as such.
TEST(Safetensors, HeaderThatIsNotAnObjectIsRefused) {
  auto with_header = [](const std::string& header) {
    uint64_t len = header.size();
    return std::string(reinterpret_cast<const char*>(&len), 8) + header;
  };
  for (const auto& [header, type] : std::vector<std::pair<std::string, std::string>>{
           {R"([{"dtype":"F32","shape":[1],"data_offsets":[0,4]}])", "array"},
           {R"("w")", "string"},
           {"8", "number"},
           {"null", "null"}}) {
    std::string bytes = with_header(header) + std::string(4, '\0');
    StatusOr<SafetensorsFile> f = parse_st(bytes, bytes.size(), "list.safetensors");
    ASSERT_FALSE(f.ok()) << header;
    EXPECT_EQ(f.status().code(), StatusCode::kCorruption) << header;
    EXPECT_EQ(f.status().message(), "list.safetensors: safetensors header is a JSON " + type +
                                        ", not an object of tensors");
  }
  std::string bytes = with_header(R"({"w":{"dtype":)");
  StatusOr<SafetensorsFile> f = parse_st(bytes, bytes.size(), "text.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "text.safetensors: safetensors header is not JSON");
}

// The model-file fuzzer's regression corpus (tests/fuzz/model-regressions, see scripts/fuzz.sh)
// replayed here too, without the fuzzer's sanitizers: the first byte picks the parser (odd:
// safetensors, even: GGUF), and every input gives an error or a file whose tensors lie inside it.
// The files named safetensors-* are damaged headers that must be refused.
TEST(ModelFiles, FuzzRegressionCorpusGivesErrorsOrFilesInsideTheInput) {
  std::string dir = std::string(TLT_SOURCE_DIR) + "/tests/fuzz/model-regressions";
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  ASSERT_GE(names.size(), 4u) << dir;
  for (const std::string& name : names) {
    std::string bytes = read_bytes(dir + "/" + name);
    ASSERT_FALSE(bytes.empty()) << name;
    const uint8_t* begin = reinterpret_cast<const uint8_t*>(bytes.data()) + 1;
    const uint8_t* end = reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size();
    auto inside = [&](const uint8_t* p, uint64_t n) {
      return n == 0 || (p >= begin && p <= end && n <= uint64_t(end - p));
    };
    if (bytes[0] & 1) {
      StatusOr<SafetensorsFile> f = parse_safetensors(begin, bytes.size() - 1, name);
      if (name.rfind("safetensors-", 0) == 0) {
        EXPECT_FALSE(f.ok()) << name << " parsed";
      }
      if (!f.ok()) continue;
      for (const SafeTensor& t : f->tensors) EXPECT_TRUE(inside(t.data, t.n_bytes)) << name;
    } else {
      StatusOr<GgufFile> f = parse_gguf(begin, bytes.size() - 1, name);
      if (!f.ok()) continue;
      for (const GgufTensor& t : f->tensors) EXPECT_TRUE(inside(t.data, t.n_bytes)) << name;
    }
  }
}

TEST(Safetensors, TinyQwen2ShardsAreBf16) {
  StatusOr<SafetensorsFile> f =
      open_safetensors(kFixtures + "/tiny-qwen2-hf/model-00001-of-00002.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_FALSE(f->tensors.empty());
  for (const SafeTensor& t : f->tensors) EXPECT_EQ(t.dtype, SafetensorsDtype::kBF16) << t.name;
}

TEST(PretrainedConfig, UnknownArchitectureAndMissingFieldsAreNamed) {
  std::string text = read_bytes(kFixtures + "/tiny-llama-hf/config.json");
  ASSERT_TRUE(config_from_hf_json(text, "config.json").ok());
  nlohmann::json j = nlohmann::json::parse(text);
  j["model_type"] = "mistral";
  StatusOr<PretrainedConfig> c = config_from_hf_json(j.dump(), "dir/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("\"mistral\""), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("dir/config.json"), std::string::npos);
  for (const char* field : {"hidden_size", "num_hidden_layers", "num_attention_heads",
                            "intermediate_size", "vocab_size", "model_type"}) {
    nlohmann::json k = nlohmann::json::parse(text);
    k.erase(field);
    StatusOr<PretrainedConfig> m = config_from_hf_json(k.dump(), "dir/config.json");
    ASSERT_FALSE(m.ok()) << field;
    EXPECT_EQ(m.status().message(), std::string("dir/config.json: ") + field + " is missing");
  }
  nlohmann::json s = nlohmann::json::parse(text);
  s["rope_scaling"] = {{"type", "llama3"}};
  EXPECT_FALSE(config_from_hf_json(s.dump(), "config.json").ok());
}

}  // namespace
}  // namespace tlt::model
