// The Kubernetes client's retries (which outcomes, how long it waits, when it gives up) and its
// token-bucket rate limit, against a scripted fake transport and a FakeClock: nothing sleeps.
#include <algorithm>
#include <deque>
#include <thread>

#include <gtest/gtest.h>

#include "kube/client.h"
#include "kube/rate_limiter.h"

namespace tlt::kube {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Answers every request (send or stream) with the next scripted outcome; stream() first passes
// the step's lines on. Records the requests.
class ScriptedTransport : public HttpTransport {
 public:
  struct Step {
    StatusOr<HttpResponse> outcome;
    std::vector<std::string> lines;  // stream(): passed to on_line before `outcome` returns
  };
  struct Shared {
    std::deque<Step> script;
    std::vector<HttpRequest> requests;
  };
  explicit ScriptedTransport(Shared* shared) : s_(shared) {}

  StatusOr<HttpResponse> send(const HttpRequest& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    s_->requests.push_back(r);
    if (s_->script.empty()) return HttpResponse(200, "{}");
    Step step = s_->script.front();
    s_->script.pop_front();
    return step.outcome;
  }
  StatusOr<HttpResponse> stream(const HttpRequest& r,
                                const std::function<bool(const std::string&)>& on_line) override {
    Step step = Step{HttpResponse(200, ""), {}};
    {
      std::lock_guard<std::mutex> lock(mu_);
      s_->requests.push_back(r);
      if (!s_->script.empty()) {
        step = s_->script.front();
        s_->script.pop_front();
      }
    }
    for (const std::string& line : step.lines) {
      if (!on_line(line)) return HttpResponse(200, "");
    }
    return step.outcome;
  }

 private:
  std::mutex mu_;
  Shared* s_;
};

HttpResponse code(int status, std::map<std::string, std::string> headers = {}) {
  return HttpResponse(status, Json{{"kind", "Status"}, {"message", "m"}}.dump(), headers);
}
HttpResponse ok() {
  return HttpResponse(200, R"({"metadata":{"name":"j"}})");
}

class RetryTest : public ::testing::Test {
 protected:
  RetryTest() {
    options_.jitter = 0;  // exact waits
    options_.qps = 0;     // no rate limit unless a test sets one
    options_.clock = &clock_;
  }
  KubeClient& client() {
    if (!client_) client_ = make_client(std::make_unique<ScriptedTransport>(&fake_), options_);
    return *client_;
  }
  void script(std::initializer_list<StatusOr<HttpResponse>> outcomes) {
    for (const auto& o : outcomes) fake_.script.push_back({o, {}});
  }

  FakeClock clock_;
  ClientOptions options_;
  ScriptedTransport::Shared fake_;
  std::unique_ptr<KubeClient> client_;
  const Resource rljobs_{"tlt.dev", "v1alpha1", "rljobs", "ns1"};
  const Json job_ = {{"metadata", {{"name", "j"}}}};
};

TEST_F(RetryTest, Get_503ThenOk_RetriedAfterInitialBackoff) {
  script({code(503), ok()});
  StatusOr<Json> j = client().get(rljobs_, "j");
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ(fake_.requests.size(), 2u);
  EXPECT_EQ(clock_.sleeps(), (std::vector<Clock::Duration>{milliseconds(50)}));
}

TEST_F(RetryTest, Get_429WithRetryAfter_WaitsThatLong) {
  script({code(429, {{"retry-after", "3"}}), ok()});
  ASSERT_TRUE(client().get(rljobs_, "j").ok());
  EXPECT_EQ(fake_.requests.size(), 2u);
  EXPECT_EQ(clock_.sleeps(), (std::vector<Clock::Duration>{seconds(3)}));
}

TEST_F(RetryTest, Get_AlwaysUnavailable_GivesUpAfterMaxAttemptsWithDoublingBackoff) {
  script({code(503), code(500), code(502), code(504), code(503), ok()});
  Status s = client().get(rljobs_, "j").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  EXPECT_NE(s.message().find("HTTP 503"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(5 attempts)"), std::string::npos) << s.message();
  EXPECT_EQ(fake_.requests.size(), 5u) << "1 + max_retries (4)";
  EXPECT_EQ(clock_.sleeps(), (std::vector<Clock::Duration>{milliseconds(50), milliseconds(100),
                                                           milliseconds(200), milliseconds(400)}));
}

TEST_F(RetryTest, Get_TransportFailures_Retried) {
  script({Status::Unavailable("GET /x: connection reset by peer"),
          Status::Unavailable(std::string(kNotSent) + "GET /x: Failed to connect"), ok()});
  StatusOr<Json> j = client().get(rljobs_, "j");
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ(fake_.requests.size(), 3u);
}

TEST_F(RetryTest, Get_TimeoutOrNotFound_NotRetried) {
  script({Status::DeadlineExceeded("GET /x: timed out"), code(404)});
  EXPECT_EQ(client().get(rljobs_, "j").status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(client().get(rljobs_, "j").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fake_.requests.size(), 2u);
  EXPECT_TRUE(clock_.sleeps().empty());
}

TEST_F(RetryTest, Writes_5xxOrResetAfterSending_NotRetried) {
  script(
      {code(500), code(503), Status::Unavailable("PATCH /x: connection reset by peer"), code(502)});
  Status create = client().create(rljobs_, job_).status();
  EXPECT_EQ(create.code(), StatusCode::kUnavailable);
  EXPECT_EQ(create.message().find("attempts"), std::string::npos) << create.message();
  EXPECT_EQ(client().apply(rljobs_, job_, "m").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client().patch(rljobs_, "j", job_).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client().remove(rljobs_, "j").code(), StatusCode::kUnavailable);
  EXPECT_EQ(fake_.requests.size(), 4u) << "one attempt each";
  EXPECT_TRUE(clock_.sleeps().empty());
}

TEST_F(RetryTest, Writes_429OrNotSent_Retried) {
  script({code(429), ok(), Status::Unavailable(std::string(kNotSent) + "PATCH /x: refused"), ok()});
  StatusOr<Json> created = client().create(rljobs_, job_);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  StatusOr<Json> patched = client().patch_status(rljobs_, "j", {{"phase", "Running"}});
  ASSERT_TRUE(patched.ok()) << patched.status().to_string();
  ASSERT_EQ(fake_.requests.size(), 4u);
  EXPECT_EQ(fake_.requests[1].method, "POST");
  EXPECT_EQ(fake_.requests[1].body, fake_.requests[0].body) << "the same request again";
}

TEST_F(RetryTest, List_FailedPage_RetriedAlone) {
  fake_.script.push_back(
      {HttpResponse(200, R"({"metadata":{"continue":"c"},"items":[{"n":1}]})"), {}});
  script({code(503)});
  fake_.script.push_back(
      {HttpResponse(200, R"({"metadata":{"resourceVersion":"9"},"items":[{"n":2}]})"), {}});
  StatusOr<ObjectList> l = client().list(rljobs_, {});
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->items.size(), 2u);
  ASSERT_EQ(fake_.requests.size(), 3u);
  EXPECT_EQ(fake_.requests[1].path, fake_.requests[2].path);
  EXPECT_NE(fake_.requests[2].path.find("continue=c"), std::string::npos);
}

TEST_F(RetryTest, BackoffCappedAtMaxBackoff) {
  options_.max_retries = 6;
  options_.max_backoff = milliseconds(300);
  script({code(503), code(503), code(503), code(503), code(503), code(503), ok()});
  ASSERT_TRUE(client().get(rljobs_, "j").ok());
  EXPECT_EQ(clock_.sleeps(), (std::vector<Clock::Duration>{milliseconds(50), milliseconds(100),
                                                           milliseconds(200), milliseconds(300),
                                                           milliseconds(300), milliseconds(300)}));
}

TEST_F(RetryTest, Jitter_WaitsWithinItsRange) {
  options_.jitter = 0.5;
  for (int i = 0; i < 20; ++i) script({code(503), ok()});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(client().get(rljobs_, "j").ok());
  std::vector<Clock::Duration> sleeps = clock_.sleeps();
  ASSERT_EQ(sleeps.size(), 20u);
  for (Clock::Duration d : sleeps) {
    EXPECT_GE(d, milliseconds(25));
    EXPECT_LE(d, milliseconds(50));
  }
  EXPECT_NE(*std::min_element(sleeps.begin(), sleeps.end()),
            *std::max_element(sleeps.begin(), sleeps.end()))
      << "20 draws, all equal: no jitter";
}

TEST_F(RetryTest, RetryAfterBeyondMaxRetryTime_GivesUpAtOnce) {
  options_.max_retry_time = seconds(5);
  script({code(429, {{"retry-after", "60"}}), ok()});
  Status s = client().get(rljobs_, "j").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  EXPECT_EQ(fake_.requests.size(), 1u);
  EXPECT_TRUE(clock_.sleeps().empty());
}

TEST_F(RetryTest, NoRetries_OneAttempt) {
  options_.max_retries = 0;
  script({code(503), ok()});
  EXPECT_EQ(client().get(rljobs_, "j").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(fake_.requests.size(), 1u);
}

TEST_F(RetryTest, Watch_InitialRequestRetriedLikeGet) {
  script({code(503), Status::Unavailable("GET /x: connection reset by peer")});
  fake_.script.push_back(
      {HttpResponse(200, ""), {R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})"}});
  std::vector<std::string> seen;
  Status s = client().watch(rljobs_, {}, [&](const WatchEvent& e) {
    seen.push_back(e.type);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED"}));
  EXPECT_EQ(fake_.requests.size(), 3u);
  EXPECT_EQ(clock_.sleeps(), (std::vector<Clock::Duration>{milliseconds(50), milliseconds(100)}));
}

TEST_F(RetryTest, Watch_BrokenAfterEvents_NotResent) {
  fake_.script.push_back({Status::Unavailable("GET /x: connection reset by peer"),
                          {R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})"}});
  int n_events = 0;
  Status s = client().watch(rljobs_, {}, [&](const WatchEvent&) { return ++n_events > 0; });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  EXPECT_EQ(n_events, 1);
  EXPECT_EQ(fake_.requests.size(), 1u) << "the caller resumes from the last resourceVersion";
}

TEST_F(RetryTest, RateLimit_SpacesRequestsAfterBurst) {
  options_.qps = 10;
  options_.burst = 2;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client().get(rljobs_, "j").ok());
  // Two from the full bucket, then one every 1/qps.
  EXPECT_EQ(clock_.sleeps(), (std::vector<Clock::Duration>{milliseconds(100), milliseconds(100),
                                                           milliseconds(100)}));
  // Time passes: the bucket refills (up to burst), and the next two go at once.
  clock_.advance(seconds(10));
  ASSERT_TRUE(client().get(rljobs_, "j").ok());
  ASSERT_TRUE(client().get(rljobs_, "j").ok());
  EXPECT_EQ(clock_.sleeps().size(), 3u);
}

TEST_F(RetryTest, RateLimit_EveryAttemptTakesATokenButWatchesDoNot) {
  options_.qps = 10;
  options_.burst = 1;
  script({code(503), ok()});
  ASSERT_TRUE(client().get(rljobs_, "j").ok());
  // The retry waited 50 ms of backoff, then 50 ms more for its token (one per 100 ms).
  EXPECT_EQ(clock_.sleeps(), (std::vector<Clock::Duration>{milliseconds(50), milliseconds(50)}));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client().watch(rljobs_, {}, [](const WatchEvent&) { return true; }).ok());
  }
  EXPECT_EQ(clock_.sleeps().size(), 2u) << "watches took no tokens";
}

TEST(TokenBucket, SharedByThreads_ReservesOneSlotEach) {
  FakeClock clock(/*advance_on_sleep=*/false);  // time stands still: every wait is a reservation
  TokenBucket bucket(/*qps=*/100, /*burst=*/3, &clock);
  constexpr int kThreads = 4, kEach = 5;
  std::mutex mu;
  std::vector<Clock::Duration> waits;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Clock::Duration w = bucket.acquire();
        std::lock_guard<std::mutex> lock(mu);
        waits.push_back(w);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::sort(waits.begin(), waits.end());
  ASSERT_EQ(waits.size(), size_t{kThreads * kEach});
  // 3 free tokens, then the 4th caller waits 10 ms, the 5th 20 ms, ... whichever thread it is.
  for (int i = 0; i < kThreads * kEach; ++i) {
    Clock::Duration want = milliseconds(10) * std::max(0, i - 2);
    EXPECT_LE(std::chrono::abs(waits[i] - want), std::chrono::microseconds(1)) << i;
  }
}

TEST(TokenBucket, ZeroQps_Unlimited) {
  FakeClock clock;
  TokenBucket bucket(0, 1, &clock);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(bucket.acquire(), Clock::Duration::zero());
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(ClientOptions, Validate_NamesTheField) {
  EXPECT_TRUE(ClientOptions{}.validate().ok());
  ClientOptions o;
  o.qps = -1;
  EXPECT_NE(o.validate().message().find("qps"), std::string::npos);
  o = ClientOptions{};
  o.burst = 0;
  EXPECT_NE(o.validate().message().find("burst"), std::string::npos);
  o = ClientOptions{};
  o.jitter = 1.5;
  EXPECT_EQ(o.validate().code(), StatusCode::kInvalidArgument);
  o = ClientOptions{};
  o.max_retries = -1;
  EXPECT_NE(o.validate().message().find("max_retries"), std::string::npos);
}

}  // namespace
}  // namespace tlt::kube
