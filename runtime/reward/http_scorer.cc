// The http source: each request POSTed to spec.reward.url (contracts: runtime/reward/scorer.h).
#include <cpprest/http_client.h>

#include <chrono>
#include <deque>
#include <thread>

#include "api/json_bounded.h"
#include "api/validate.h"
#include "runtime/reward/sources.h"

namespace tlt::reward {
namespace {

namespace http = web::http;

// One attempt's outcome: a reward, or an error that is worth a retry (transient) or not.
struct Attempt {
  StatusOr<double> reward = 0.0;
  bool transient = false;
};

class HttpScorer : public Scorer {
 public:
  explicit HttpScorer(const api::RewardSpec& spec)
      : url_(spec.url), timeout_s_(spec.timeout.seconds), retries_(spec.retries) {
    http::client::http_client_config config;
    config.set_timeout(std::chrono::microseconds(int64_t(timeout_s_ * 1e6)));
    client_ = std::make_unique<http::client::http_client>(url_, config);
    for (int i = 0; i < spec.concurrency; ++i) threads_.emplace_back([this] { serve(); });
  }
  ~HttpScorer() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 protected:
  void start(size_t slot, ScoreRequest request) override {
    StatusOr<nlohmann::json> j = request_json(request);
    if (!j.ok()) return finish(slot, j.status());
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(
          {slot, request.id, j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
    }
    cv_.notify_one();
  }

 private:
  struct Job {
    size_t slot;
    std::string id, body;
  };
  void serve();
  Attempt post(const Job& job);
  StatusOr<double> score(const Job& job);

  std::string url_;
  double timeout_s_;
  int retries_;
  std::unique_ptr<http::client::http_client> client_;  // thread-safe
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

Attempt HttpScorer::post(const Job& job) {
  const std::string where = "spec.reward.url: " + url_ + " for id \"" + job.id + "\"";
  http::http_response resp;
  std::string body;
  try {
    http::http_request req(http::methods::POST);
    req.set_body(job.body, "application/json");
    resp = client_->request(req).get();
    body = resp.extract_utf8string(true).get();
  } catch (const std::exception& e) {  // timeout (spec.reward.timeout), refused, reset
    return {Status::Unavailable(where + ": " + e.what() + " (spec.reward.timeout " +
                                api::format_seconds(timeout_s_) + ")"),
            true};
  }
  const int code = resp.status_code();
  if (code >= 500) return {Status::Unavailable(where + ": answered " + std::to_string(code)), true};
  if (code != 200)
    return {Status::FailedPrecondition(where + ": answered " + std::to_string(code)), false};
  if (api::json_depth(body) > api::kMaxJsonDepth)
    return {Status::InvalidArgument(where + ": the answer is JSON nested deeper than " +
                                    std::to_string(api::kMaxJsonDepth) +
                                    " levels: " + body.substr(0, 200)),
            false};
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("reward"))
    return {
        Status::InvalidArgument(
            where + ": the answer is not a JSON object with a \"reward\": " + body.substr(0, 200)),
        false};
  if (j.contains("id") && j["id"] != job.id)
    return {Status::InvalidArgument(where + ": the answer names id " + j["id"].dump()), false};
  return {check_reward(j["reward"], "spec.reward.url", job.id), false};
}

StatusOr<double> HttpScorer::score(const Job& job) {
  Attempt a;
  for (int attempt = 0; attempt <= retries_; ++attempt) {
    a = post(job);
    if (!a.transient) return a.reward;
    if (attempt < retries_)
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt, 4)));
  }
  return a.reward.status().with_context("gave up after " + std::to_string(retries_) +
                                        " retries (spec.reward.retries)");
}

void HttpScorer::serve() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    finish(job.slot, score(job));
  }
}

}  // namespace

StatusOr<std::unique_ptr<Scorer>> make_http_scorer(const api::RewardSpec& spec) {
  if (spec.url.empty()) return Status::InvalidArgument("spec.reward.url: required for type http");
  try {
    return std::unique_ptr<Scorer>(new HttpScorer(spec));
  } catch (const std::exception& e) {
    return Status::InvalidArgument("spec.reward.url: " + spec.url + ": " + e.what());
  }
}

}  // namespace tlt::reward
