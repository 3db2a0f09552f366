#include "runtime/rl/samples.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "api/json_bounded.h"
#include "runtime/io/atomic_file.h"
#include "runtime/rl/scoring.h"

namespace tlt::rl {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A row's text as one line of JSON (invalid UTF-8 in a response replaced, never a throw).
std::string line_of(const SampleRow& r) {
  return to_json(r).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// The step of a line of samples.jsonl, or -1 when it is not a row.
int64_t line_step(const std::string& line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return -1;
  return j["step"].get<int64_t>();
}

// Keeps the rows of `path` up to step `through` (a resumed run scores the later steps again).
Status keep_through(const std::string& path, int64_t through) {
  std::ifstream in(path);
  if (!in) return Status::Ok();  // nothing recorded yet
  std::string kept, line;
  while (std::getline(in, line)) {
    int64_t step = line_step(line);
    if (step >= 0 && step <= through) kept += line + "\n";
  }
  return io::atomic_write(path, kept, io::Sync::kNone);
}

}  // namespace

nlohmann::ordered_json to_json(const SampleRow& r) {
  nlohmann::ordered_json j = {{"step", r.step}, {"phase", r.phase}, {"id", r.id}};
  if (!r.problem.empty()) j["problem"] = r.problem;
  j["prompt"] = r.prompt, j["response"] = r.response, j["answer"] = r.answer;
  if (!r.fields.is_null()) j["fields"] = r.fields;
  j["reward"] = r.reward, j["tokens"] = r.tokens, j["promptTokens"] = r.prompt_tokens;
  j["finish"] = r.finish;
  return j;
}

StatusOr<SampleRow> sample_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return Status::InvalidArgument(where + ": not a JSON object");
  auto field = [&](const char* name, bool (json::*is)() const, const char* what) -> Status {
    auto it = j.find(name);
    if (it == j.end() || !((*it).*is)())
      return Status::InvalidArgument(where + ": \"" + name + "\" is missing or not " + what);
    return Status::Ok();
  };
  TLT_RETURN_IF_ERROR(field("step", &json::is_number_integer, "an integer"));
  TLT_RETURN_IF_ERROR(field("phase", &json::is_string, "a string"));
  TLT_RETURN_IF_ERROR(field("id", &json::is_string, "a string"));
  TLT_RETURN_IF_ERROR(field("prompt", &json::is_string, "a string"));
  TLT_RETURN_IF_ERROR(field("response", &json::is_string, "a string"));
  TLT_RETURN_IF_ERROR(field("reward", &json::is_number, "a number"));
  TLT_RETURN_IF_ERROR(field("tokens", &json::is_number_integer, "an integer"));
  SampleRow r;
  r.step = j["step"].get<int64_t>();
  r.phase = j["phase"].get<std::string>(), r.id = j["id"].get<std::string>();
  r.prompt = j["prompt"].get<std::string>(), r.response = j["response"].get<std::string>();
  r.reward = j["reward"].get<double>(), r.tokens = j["tokens"].get<int64_t>();
  if (auto it = j.find("problem"); it != j.end() && it->is_string())
    r.problem = it->get<std::string>();
  if (auto it = j.find("answer"); it != j.end()) r.answer = *it;
  if (auto it = j.find("fields"); it != j.end()) r.fields = *it;
  if (auto it = j.find("promptTokens"); it != j.end() && it->is_number_integer())
    r.prompt_tokens = it->get<int64_t>();
  if (auto it = j.find("finish"); it != j.end() && it->is_string())
    r.finish = it->get<std::string>();
  return r;
}

StatusOr<std::vector<SampleRow>> read_samples(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot be read");
  std::vector<SampleRow> rows;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(n);
    StatusOr<json> j = api::parse_json_bounded(line, where);
    if (!j.ok()) return j.status();
    StatusOr<SampleRow> r = sample_from_json(*j, where);
    if (!r.ok()) return r.status();
    rows.push_back(std::move(*r));
  }
  return rows;
}

std::string finish_reason(const std::vector<int64_t>& response, const Codec& codec,
                          int64_t max_response_tokens) {
  const std::vector<int64_t>& ends = codec.end_ids();
  if (!response.empty() && std::find(ends.begin(), ends.end(), response.back()) != ends.end())
    return "eos";
  return int64_t(response.size()) >= max_response_tokens ? "length" : "context";
}

SampleLog::SampleLog(std::string path, int64_t every, const Codec* codec,
                     int64_t max_response_tokens, int64_t kept_through_step,
                     std::function<void(const std::string&)> on_warning)
    : path_(std::move(path)),
      every_(every),
      codec_(codec),
      max_response_tokens_(max_response_tokens),
      warn_(std::move(on_warning)) {
  if (every_ <= 0 || path_.empty() || !codec_) return;
  std::error_code ec;
  if (fs::path dir = fs::path(path_).parent_path(); !dir.empty()) fs::create_directories(dir, ec);
  if (ec) {
    warn(ec.message());
    return;
  }
  if (kept_through_step >= 0) {
    if (Status kept = keep_through(path_, kept_through_step); !kept.ok()) {
      warn(kept.message());
      return;
    }
  }
  out_.open(path_, kept_through_step >= 0 ? std::ios::app : std::ios::trunc);
  if (!out_) warn("cannot be opened for writing");
}

void SampleLog::warn(const std::string& what) {
  if (failed_) return;
  failed_ = true;
  if (warn_)
    warn_("warning: " + path_ + ": " + what +
          "; no more samples are recorded (spec.report.samples; the run goes on)");
}

bool SampleLog::row(int64_t step, const std::string& phase, const Problem& p,
                    const std::vector<int64_t>& prompt, const std::vector<int64_t>& response,
                    double reward, const std::string& id, SampleRow* out) {
  StatusOr<std::string> prompt_text = codec_->render(prompt);
  StatusOr<std::string> text = codec_->decode(response);
  if (!prompt_text.ok() || !text.ok()) {
    warn((prompt_text.ok() ? text : prompt_text).status().message());
    return false;
  }
  reward::ScoreRequest req = score_request(p, id, std::move(*text));
  SampleRow& r = *out;
  r.step = step, r.phase = phase, r.id = req.id, r.problem = p.id;
  r.prompt = std::move(*prompt_text), r.response = std::move(req.response);
  r.answer = json::parse(req.reference_json, nullptr, /*allow_exceptions=*/false);
  if (r.answer.is_discarded()) r.answer = req.reference_json;
  if (!req.fields_json.empty()) {
    r.fields = json::parse(req.fields_json, nullptr, /*allow_exceptions=*/false);
    if (r.fields.is_discarded()) r.fields = req.fields_json;
  }
  r.reward = reward;
  r.tokens = int64_t(response.size()), r.prompt_tokens = int64_t(prompt.size());
  r.finish = finish_reason(response, *codec_, max_response_tokens_);
  return true;
}

void SampleLog::record(int64_t step, const std::string& phase, const std::vector<Problem>& problems,
                       const std::vector<std::vector<int64_t>>& prompts,
                       const std::vector<std::vector<int64_t>>& responses,
                       const std::vector<double>& rewards,
                       const std::function<std::string(int64_t j)>& request_id) {
  if (failed_ || every_ <= 0 || !out_.is_open() || problems.empty()) return;
  const int64_t n = int64_t(responses.size()), p = int64_t(problems.size());
  if (int64_t(prompts.size()) != n || int64_t(rewards.size()) != n || n % p != 0)
    return warn("a " + phase + " batch of step " + std::to_string(step) + " has " +
                std::to_string(n) + " responses, " + std::to_string(prompts.size()) +
                " prompts and " + std::to_string(rewards.size()) + " rewards for " +
                std::to_string(problems.size()) + " problems");
  const int64_t per_problem = n / p;
  // The run's count of the batch's first response: train steps follow each other.
  const int64_t first = phase == "train" ? (step - 1) * n : 0;
  std::ostringstream lines;
  for (int64_t j = 0; j < n; ++j) {
    if ((first + j) % every_ != 0) continue;
    SampleRow r;
    if (!row(step, phase, problems[size_t(j / per_problem)], prompts[size_t(j)],
             responses[size_t(j)], rewards[size_t(j)], request_id(j), &r))
      return;
    lines << line_of(r) << "\n";
  }
  out_ << lines.str();
  out_.flush();
  if (!out_) warn("a write failed");
}

}  // namespace tlt::rl
