#include "runtime/reward/scorer.h"

#include <cmath>
#include <utility>

#include "api/json_bounded.h"
#include "runtime/reward/sources.h"
#include "runtime/reward/verifiers.h"

namespace tlt::reward {
namespace {

// The keys of every request on the wire (request_json); "row" holds the whole row ("*").
constexpr const char* kRequestKeys[] = {"id", "prompt", "response", "answer", "row"};

// The reference answer of request `r`, parsed; InvalidArgument naming `answer` and the request.
StatusOr<nlohmann::json> reference_of(const ScoreRequest& r) {
  return api::parse_json_bounded(r.reference_json, "answer: the reference of " + r.id);
}

// A source that scores in submit(): the task's own reward or a built-in verifier.
class LocalScorer : public Scorer {
 public:
  explicit LocalScorer(std::function<StatusOr<double>(const ScoreRequest&)> score)
      : score_(std::move(score)) {}

 protected:
  void start(size_t slot, ScoreRequest request) override { finish(slot, score_(request)); }

 private:
  std::function<StatusOr<double>(const ScoreRequest&)> score_;
};

std::unique_ptr<Scorer> make_verifier_scorer(const VerifierOptions& o) {
  return std::unique_ptr<Scorer>(new LocalScorer([o](const ScoreRequest& r) -> StatusOr<double> {
    StatusOr<nlohmann::json> answer = reference_of(r);
    if (!answer.ok()) return answer.status();
    StatusOr<double> s = score(o, r.response, *answer);
    if (!s.ok()) return s.status().with_context(r.id);
    return s;
  }));
}

// spec.reward.fields: a command or http reward on a dataset, names that are not the wire's own.
Status check_fields(const ScorerOptions& o) {
  const std::string f = "spec.reward.fields: ";
  if (o.spec.row_fields.empty()) return Status::Ok();
  if (o.spec.type != "command" && o.spec.type != "http")
    return Status::InvalidArgument(f + "only a command or http reward is sent the row's fields " +
                                   "(type is \"" + o.spec.type + "\"); drop it");
  if (!o.dataset)
    return Status::InvalidArgument(f + "only a dataset's rows (spec.task.dataset) have fields; " +
                                   "a generated task's request is {id, prompt, response, answer}");
  for (const std::string& name : o.spec.row_fields) {
    for (const char* taken : kRequestKeys) {
      if (name == taken)
        return Status::InvalidArgument(
            f + "\"" + name + "\" is a key the request has already (id, prompt, response, " +
            "answer, and row for \"*\"); send the whole row with \"*\" for a column of " +
            "that name");
    }
    if (name.empty()) return Status::InvalidArgument(f + "a field name is empty");
  }
  return Status::Ok();
}

}  // namespace

void Scorer::begin(size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    rewards_.assign(n, std::nullopt);
    submitted_.assign(n, false);
    done_ = 0;
    error_ = Status::Ok();
  }
  on_begin();
}

void Scorer::submit(size_t slot, ScoreRequest request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (slot >= submitted_.size() || submitted_[slot]) return;
    submitted_[slot] = true;
  }
  start(slot, std::move(request));
}

bool Scorer::submitted(size_t slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return slot < submitted_.size() && submitted_[slot];
}

size_t Scorer::scored() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Scorer::finish(size_t slot, StatusOr<double> reward) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot >= rewards_.size() || rewards_[slot]) return;
  if (!reward.ok()) {
    if (error_.ok()) error_ = reward.status();
    rewards_[slot] = 0.0;  // counted as done; the batch reports error_
  } else {
    rewards_[slot] = *reward;
  }
  ++done_;
  cv_.notify_all();
}

StatusOr<std::vector<double>> Scorer::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  for (size_t i = 0; i < submitted_.size(); ++i) {
    if (!submitted_[i])
      return Status::FailedPrecondition("reward: response " + std::to_string(i) +
                                        " of the batch was never submitted");
  }
  cv_.wait(lock, [&] { return done_ == rewards_.size(); });
  if (!error_.ok()) return error_;
  std::vector<double> out;
  for (const auto& r : rewards_) out.push_back(*r);
  return out;
}

StatusOr<double> check_reward(const nlohmann::json& value, const std::string& field,
                              const std::string& id) {
  const std::string where = field + ": the reward for id \"" + id + "\" ";
  if (value.is_boolean()) return value.get<bool>() ? 1.0 : 0.0;
  // verl's compute_score may return {"score": x, ...} (its other keys are the program's own).
  const bool dict = value.is_object() && value.contains("score");
  const nlohmann::json& v = dict ? value["score"] : value;
  if (dict && v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (!v.is_number())
    return Status::InvalidArgument(where +
                                   "must be a number, true, false or {\"score\": number} (got " +
                                   value.dump().substr(0, 200) + ")");
  double x = v.get<double>();
  if (!std::isfinite(x) || std::fabs(x) > kMaxAbsReward)
    return Status::InvalidArgument(where + "must be finite and within [-1e6, 1e6] (got " +
                                   v.dump() + ")");
  return x;
}

StatusOr<nlohmann::json> request_json(const ScoreRequest& r) {
  StatusOr<nlohmann::json> answer = reference_of(r);
  if (!answer.ok()) return answer.status();
  nlohmann::json j{
      {"id", r.id}, {"prompt", r.prompt}, {"response", r.response}, {"answer", *answer}};
  if (r.fields_json.empty()) return j;
  StatusOr<nlohmann::json> fields =
      api::parse_json_bounded(r.fields_json, "spec.reward.fields: the row's fields for " + r.id);
  if (!fields.ok()) return fields.status();
  if (fields->is_object()) {
    for (auto it = fields->begin(); it != fields->end(); ++it) {
      if (!j.contains(it.key())) j[it.key()] = it.value();  // check_fields keeps them apart
    }
  }
  return j;
}

StatusOr<std::unique_ptr<Scorer>> make_scorer(const ScorerOptions& o) {
  const std::string& type = o.spec.type;
  TLT_RETURN_IF_ERROR(check_fields(o));
  if (type.empty() && !o.dataset) {
    if (!o.task_reward)
      return Status::InvalidArgument("spec.reward.type: required for a task without a reward");
    auto f = o.task_reward;
    return std::unique_ptr<Scorer>(
        new LocalScorer([f](const ScoreRequest& r) -> StatusOr<double> { return f(r); }));
  }
  StatusOr<std::optional<VerifierOptions>> verifier = verifier_options(o.spec);
  if (!verifier.ok()) return verifier.status();
  if (*verifier) return make_verifier_scorer(**verifier);
  if (type == "http") return make_http_scorer(o.spec);
  if (!o.pipe_dir.empty()) return make_fifo_scorer(o.spec, o.pipe_dir);  // command, a sidecar
  return make_command_scorer(o.spec);
}

}  // namespace tlt::reward
