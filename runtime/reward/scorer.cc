#include "runtime/reward/scorer.h"

#include <cmath>
#include <utility>

#include "api/json_bounded.h"
#include "runtime/reward/sources.h"
#include "runtime/reward/verifiers.h"

namespace tlt::reward {
namespace {

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

StatusOr<std::unique_ptr<Scorer>> make_verifier_scorer(const api::RewardSpec& spec,
                                                       VerifierType type) {
  VerifierOptions o;
  o.type = type;
  o.relative_tolerance = spec.relative_tolerance;
  o.absolute_tolerance = spec.absolute_tolerance;
  o.pattern = spec.pattern;
  TLT_RETURN_IF_ERROR(o.validate());
  return std::unique_ptr<Scorer>(new LocalScorer([o](const ScoreRequest& r) -> StatusOr<double> {
    StatusOr<nlohmann::json> answer = reference_of(r);
    if (!answer.ok()) return answer.status();
    StatusOr<double> s = score(o, r.response, *answer);
    if (!s.ok()) return s.status().with_context(r.id);
    return s;
  }));
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
  if (!value.is_number())
    return Status::InvalidArgument(where + "must be a number (got " + value.dump() + ")");
  double v = value.get<double>();
  if (!std::isfinite(v) || std::fabs(v) > kMaxAbsReward)
    return Status::InvalidArgument(where + "must be finite and within [-1e6, 1e6] (got " +
                                   value.dump() + ")");
  return v;
}

StatusOr<nlohmann::json> request_json(const ScoreRequest& r) {
  StatusOr<nlohmann::json> answer = reference_of(r);
  if (!answer.ok()) return answer.status();
  return nlohmann::json{
      {"id", r.id}, {"prompt", r.prompt}, {"response", r.response}, {"answer", *answer}};
}

StatusOr<std::unique_ptr<Scorer>> make_scorer(const ScorerOptions& o) {
  const std::string& type = o.spec.type;
  if (type.empty() && !o.dataset) {
    if (!o.task_reward)
      return Status::InvalidArgument("spec.reward.type: required for a task without a reward");
    auto f = o.task_reward;
    return std::unique_ptr<Scorer>(
        new LocalScorer([f](const ScoreRequest& r) -> StatusOr<double> { return f(r); }));
  }
  if (type.empty()) return make_verifier_scorer(o.spec, VerifierType::kMath);
  if (type == "command") {
    if (!o.pipe_dir.empty()) return make_fifo_scorer(o.spec, o.pipe_dir);
    return make_command_scorer(o.spec);
  }
  if (type == "http") return make_http_scorer(o.spec);
  StatusOr<VerifierType> v = verifier_type_from_name(type);
  if (!v.ok()) return v.status();
  return make_verifier_scorer(o.spec, *v);
}

}  // namespace tlt::reward
