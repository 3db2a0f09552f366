// Manifest entry points: dispatch on kind, decode, validate, gather every error.
#include "api/manifest.h"

#include <fstream>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include "api/decode.h"
#include "api/validate.h"

namespace tlt::api {
namespace {

constexpr size_t kMaxManifestBytes = 4 << 20;  // a job spec is kilobytes; refuse megabytes
constexpr int kMaxDocuments = 1000;

// Records where each document starts, and nothing else.
class DocumentStarts : public YAML::EventHandler {
 public:
  size_t first_pos = 0;
  bool seen = false;
  void OnDocumentStart(const YAML::Mark& mark) override { note(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { note(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { note(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    note(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    note(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    note(mark);
  }
  void OnMapEnd() override {}

 private:
  void note(const YAML::Mark& mark) {
    if (!seen) first_pos = static_cast<size_t>(mark.pos);
    seen = true;
  }
};

// yaml-cpp 0.7 (Debian's) loops forever in LoadAll on some malformed streams (a line starting
// with ',' among them): the parser reports the same empty document again and again without
// consuming input (fixed upstream in yaml-cpp PR #1319). Walk the documents once with a bound
// and refuse a stream that stops making progress, so LoadAll only ever sees streams that end.
// Returns "" when the stream is safe, else the error to report.
std::string check_document_stream(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  long long last_pos = -1;
  for (int n = 0; n <= kMaxDocuments; ++n) {
    DocumentStarts starts;
    if (!parser.HandleNextDocument(starts)) return "";
    long long pos = starts.seen ? static_cast<long long>(starts.first_pos) : -1;
    if (pos >= 0 && pos == last_pos) {
      int line = 1, column = 1;
      for (size_t i = 0; i < static_cast<size_t>(pos) && i < text.size(); ++i) {
        if (text[i] == '\n')
          ++line, column = 1;
        else
          ++column;
      }
      return "YAML syntax error at line " + std::to_string(line) + ", column " +
             std::to_string(column) + ": unexpected character; the parser cannot continue here";
    }
    if (pos >= 0) last_pos = pos;
  }
  return "more than " + std::to_string(kMaxDocuments) + " YAML documents; split the file";
}

// Decodes a document of known kind and validates it, so one pass reports every problem. A
// value that failed to decode keeps its default; rule errors about such a path would mislead,
// so they are dropped.
template <class T>
Job decode_and_validate(const YAML::Node& node, FieldErrors* errors) {
  T job;
  decode(node, &job, errors);
  FieldErrors rule_errors;
  validate(job, &rule_errors);
  size_t n_decode = errors->size();
  for (FieldError& e : rule_errors) {
    bool shadowed = false;
    for (size_t i = 0; i < n_decode; ++i) shadowed |= (*errors)[i].path == e.path;
    if (!shadowed) errors->push_back(std::move(e));
  }
  return job;
}

std::optional<Job> decode_document(const YAML::Node& node, FieldErrors* errors) {
  if (!node.IsMap()) {
    errors->push_back({"",
                       "a job manifest must be a mapping with apiVersion, kind, metadata and "
                       "spec"});
    return std::nullopt;
  }
  const YAML::Node kind = node["kind"];
  if (!kind.IsDefined() || kind.IsNull()) {
    errors->push_back({"kind", std::string("is required: \"") + kRLJobKind + "\" or \"" +
                                   kTSTPretrainJobKind + "\""});
    return std::nullopt;
  }
  std::string k = kind.IsScalar() ? kind.Scalar() : "";
  if (k == kRLJobKind) return decode_and_validate<RLJob>(node, errors);
  if (k == kTSTPretrainJobKind) return decode_and_validate<TSTPretrainJob>(node, errors);
  std::string hint = nearest_name(k, {kRLJobKind, kTSTPretrainJobKind});
  errors->push_back({"kind", std::string("must be \"") + kRLJobKind + "\" or \"" +
                                 kTSTPretrainJobKind + "\" (got \"" + k + "\")" +
                                 (hint.empty() ? "" : "; did you mean \"" + hint + "\"?")});
  return std::nullopt;
}

}  // namespace

std::vector<Document> parse_manifests(const std::string& yaml_text) {
  std::vector<Document> docs;
  if (yaml_text.size() > kMaxManifestBytes) {
    Document d;
    d.errors.push_back({"", "manifest is larger than 4 MiB; a job spec should be kilobytes"});
    docs.push_back(std::move(d));
    return docs;
  }
  std::vector<YAML::Node> nodes;
  try {
    std::string stream_error = check_document_stream(yaml_text);
    if (!stream_error.empty()) {
      Document d;
      d.errors.push_back({"", stream_error});
      docs.push_back(std::move(d));
      return docs;
    }
    nodes = YAML::LoadAll(yaml_text);
  } catch (const YAML::Exception& e) {
    Document d;
    d.errors.push_back({"", "YAML syntax error at line " + std::to_string(e.mark.line + 1) +
                                ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg});
    docs.push_back(std::move(d));
    return docs;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].IsDefined() || nodes[i].IsNull()) continue;
    Document d;
    d.index = static_cast<int>(i);
    try {
      d.job = decode_document(nodes[i], &d.errors);
    } catch (const YAML::Exception& e) {
      // yaml-cpp may throw lazily while iterating a malformed tree.
      d.errors.push_back({"", std::string("YAML error: ") + e.what()});
    }
    docs.push_back(std::move(d));
  }
  return docs;
}

StatusOr<std::vector<Document>> parse_manifest_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open the file; check the path");
  std::ostringstream buf;
  buf << in.rdbuf();
  std::vector<Document> docs = parse_manifests(buf.str());
  if (docs.empty()) {
    return Status::InvalidArgument(path + ": holds no YAML document; write a job manifest");
  }
  return docs;
}

std::string join_errors(const FieldErrors& errors) {
  std::string s;
  for (const FieldError& e : errors) s += (s.empty() ? "" : "\n") + e.to_string();
  return s;
}

StatusOr<Job> parse_job_json(const nlohmann::json& object) {
  FieldErrors errors;
  std::optional<Job> job;
  try {
    job = decode_document(json_to_yaml(object), &errors);
  } catch (const YAML::Exception& e) {
    errors.push_back({"", std::string("malformed object: ") + e.what()});
  }
  if (!errors.empty() || !job) return Status::InvalidArgument(join_errors(errors));
  return std::move(*job);
}

StatusOr<Job> parse_job_yaml(const std::string& yaml_text) {
  std::vector<Document> docs = parse_manifests(yaml_text);
  if (docs.size() != 1) {
    return Status::InvalidArgument("expected exactly one job document, found " +
                                   std::to_string(docs.size()));
  }
  if (!docs[0].ok()) return Status::InvalidArgument(join_errors(docs[0].errors));
  return std::move(*docs[0].job);
}

const std::string& job_kind(const Job& job) {
  return std::visit([](const auto& j) -> const std::string& { return j.kind; }, job);
}
const std::string& job_name(const Job& job) {
  return std::visit([](const auto& j) -> const std::string& { return j.metadata.name; }, job);
}

}  // namespace tlt::api
