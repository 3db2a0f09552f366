// Manifest entry points, and the malformed-manifest corpus under tests/manifests/bad: each file
// begins with one "# expect: PATH | MESSAGE FRAGMENT" line per error it must produce, and must
// produce exactly those paths.
#include "api/manifest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/encode.h"

namespace tlt::api {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = TLT_SOURCE_DIR;

struct Expectation {
  std::string path, fragment;
};

std::vector<Expectation> expectations_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<Expectation> out;
  const std::string tag = "# expect: ";
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, tag.size(), tag) != 0) continue;
    std::string rest = line.substr(tag.size());
    size_t bar = rest.find(" | ");
    if (bar == std::string::npos) continue;
    out.push_back({rest.substr(0, bar), rest.substr(bar + 3)});
  }
  return out;
}

std::vector<std::string> bad_manifests() {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(kSource / "tests/manifests/bad")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class BadManifest : public ::testing::TestWithParam<std::string> {};

TEST_P(BadManifest, ProducesExactlyTheExpectedFieldPaths) {
  fs::path file = kSource / "tests/manifests/bad" / GetParam();
  std::vector<Expectation> want = expectations_of(file);
  ASSERT_FALSE(want.empty()) << file << " has no '# expect:' line";
  auto docs = parse_manifest_file(file.string());
  ASSERT_TRUE(docs.ok()) << docs.status().to_string();
  ASSERT_EQ(docs->size(), 1u);
  const FieldErrors& got = (*docs)[0].errors;
  std::string listing = join_errors(got);
  std::vector<std::string> got_paths, want_paths;
  for (const FieldError& e : got) got_paths.push_back(e.path);
  for (const Expectation& e : want) want_paths.push_back(e.path);
  std::sort(got_paths.begin(), got_paths.end());
  std::sort(want_paths.begin(), want_paths.end());
  EXPECT_EQ(got_paths, want_paths) << listing;
  for (const Expectation& e : want) {
    bool found = std::any_of(got.begin(), got.end(), [&](const FieldError& g) {
      return g.path == e.path && g.message.find(e.fragment) != std::string::npos;
    });
    EXPECT_TRUE(found) << "no error at " << e.path << " containing \"" << e.fragment << "\"; got:\n"
                       << listing;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadManifest, ::testing::ValuesIn(bad_manifests()),
                         [](const auto& info) {
                           std::string name = info.param.substr(0, info.param.size() - 5);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(BadManifestCorpus, HasAtLeast25Files) {
  EXPECT_GE(bad_manifests().size(), 25u);
}

TEST(Examples, AllValidate) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(kSource / "examples")) {
    if (entry.path().extension() != ".yaml") continue;
    auto docs = parse_manifest_file(entry.path().string());
    ASSERT_TRUE(docs.ok()) << entry.path();
    for (const Document& d : *docs) EXPECT_TRUE(d.ok()) << entry.path() << join_errors(d.errors);
    ++n;
  }
  EXPECT_GE(n, 4);
}

TEST(Manifest, MultipleDocumentsEachReported) {
  std::string yaml = R"(
kind: RLJob
metadata: {name: a}
spec: {}
---
---
kind: TSTPretrainJob
metadata: {name: b}
spec: {training: {steps: 0}}
)";
  std::vector<Document> docs = parse_manifests(yaml);
  ASSERT_EQ(docs.size(), 2u) << "empty documents are skipped";
  EXPECT_TRUE(docs[0].ok());
  EXPECT_EQ(docs[1].index, 2);
  ASSERT_FALSE(docs[1].ok());
  EXPECT_EQ(docs[1].errors[0].path, "spec.training.steps");
  ASSERT_TRUE(docs[1].job.has_value());
  EXPECT_EQ(job_kind(*docs[1].job), "TSTPretrainJob");
}

TEST(Manifest, MissingKindAndNonMapping) {
  std::vector<Document> docs = parse_manifests("metadata: {name: a}\n");
  ASSERT_EQ(docs.size(), 1u);
  ASSERT_EQ(docs[0].errors.size(), 1u);
  EXPECT_EQ(docs[0].errors[0].path, "kind");
  docs = parse_manifests("- just\n- a list\n");
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_FALSE(docs[0].job.has_value());
  EXPECT_NE(docs[0].errors[0].message.find("must be a mapping"), std::string::npos);
}

TEST(Manifest, FileErrors) {
  auto missing = parse_manifest_file("/nonexistent/job.yaml");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  fs::path empty = fs::temp_directory_path() / "tlt_empty_manifest.yaml";
  std::ofstream(empty) << "# only a comment\n";
  auto none = parse_manifest_file(empty.string());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  fs::remove(empty);
}

// yaml-cpp 0.7's LoadAll loops forever (allocating) on these; the parser must refuse them.
TEST(Manifest, StreamsThatHangYamlCppAreRefused) {
  for (const char* name : {"leading-comma.yaml", "yaml-cpp-loadall-loop.yaml"}) {
    auto docs = parse_manifest_file((kSource / "tests/fuzz/regressions" / name).string());
    ASSERT_TRUE(docs.ok()) << name;
    ASSERT_EQ(docs->size(), 1u) << name;
    ASSERT_FALSE((*docs)[0].errors.empty()) << name;
    EXPECT_NE((*docs)[0].errors[0].message.find("YAML syntax error at line"), std::string::npos)
        << (*docs)[0].errors[0].message;
  }
}

// Found by the fuzzer: a bare tag (`type: !bpe`) decodes as an empty string, which used to pass
// as "unset" and then change in the JSON round trip.
TEST(Manifest, ExplicitEmptyEnumIsAnError) {
  auto docs =
      parse_manifest_file((kSource / "tests/fuzz/regressions/tagged-empty-enum.yaml").string());
  ASSERT_TRUE(docs.ok());
  ASSERT_EQ(docs->size(), 1u);
  ASSERT_EQ((*docs)[0].errors.size(), 1u) << join_errors((*docs)[0].errors);
  EXPECT_EQ((*docs)[0].errors[0].path, "spec.data.tokenizer.type");
}

TEST(Manifest, OversizedInputRefused) {
  std::string big(5 << 20, ' ');
  std::vector<Document> docs = parse_manifests(big);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_NE(docs[0].errors[0].message.find("larger than 4 MiB"), std::string::npos);
}

TEST(Manifest, JsonFromApiserver) {
  nlohmann::json obj = {{"apiVersion", "tlt.dev/v1alpha1"},
                        {"kind", "TSTPretrainJob"},
                        {"metadata", {{"name", "t"}, {"uid", "u-1"}, {"generation", 2}}},
                        {"spec", {{"superposition", {{"bagSize", 8}}}}}};
  StatusOr<Job> job = parse_job_json(obj);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  const auto& tst = std::get<TSTPretrainJob>(*job);
  EXPECT_EQ(tst.spec.superposition.bag_size, 8);
  EXPECT_EQ(tst.metadata.generation, 2);

  obj["spec"]["superposition"]["bagSize"] = 0;
  obj["spec"]["workers"] = {{"replica", 2}};
  StatusOr<Job> bad = parse_job_json(obj);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("spec.superposition.bagSize: must be >= 1 (got 0)"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("spec.workers.replica: unknown field; did you mean"),
            std::string::npos);
}

TEST(Manifest, JsonStringsAreNotNumbers) {
  // A JSON string where a number belongs is a type error, as the apiserver's schema would say.
  nlohmann::json obj = {{"kind", "RLJob"},
                        {"metadata", {{"name", "a"}}},
                        {"spec", {{"algorithm", {{"temperature", 0.5}, {"steps", 3}}}}}};
  StatusOr<Job> job = parse_job_json(obj);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_DOUBLE_EQ(std::get<RLJob>(*job).spec.algorithm.temperature, 0.5);
}

TEST(Manifest, ReferenceListsEveryKind) {
  std::string rl = reference_markdown("RLJob");
  EXPECT_NE(rl.find("`spec.speculative.activationThreshold` | `32`"), std::string::npos);
  std::string tst = reference_markdown("TSTPretrainJob");
  EXPECT_NE(tst.find("`spec.superposition.bagSize` | `6`"), std::string::npos);
  EXPECT_EQ(reference_markdown("Pod"), "");
}

}  // namespace
}  // namespace tlt::api
