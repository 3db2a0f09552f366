// tlt::metrics: the exposition of every runtime metric, worker-state switching, the accept-length
// histogram, input checks, and the /metrics server over a real TCP connection.
#include "runtime/metrics/metrics.h"

#include "runtime/cli/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tlt::metrics {
namespace {

// The value of the series `series` (name and labels exactly as exposed, e.g.
// `tlt_rl_step{job="j"}`) in an exposition; fails the test and returns NaN when absent.
double value_of(const std::string& text, const std::string& series) {
  std::string line_start = series + " ";
  size_t pos = 0;
  while ((pos = text.find(line_start, pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') {
      size_t end = text.find('\n', pos);
      return std::stod(text.substr(pos + line_start.size(), end - pos - line_start.size()));
    }
    ++pos;
  }
  ADD_FAILURE() << "no series " << series << " in:\n" << text;
  return std::nan("");
}

bool has_series(const std::string& text, const std::string& series) {
  return text.find("\n" + series + " ") != std::string::npos || text.rfind(series + " ", 0) == 0;
}

std::string state_series(const std::string& pod, const std::string& state) {
  return "tlt_worker_state{job=\"j\",pod=\"" + pod + "\",role=\"rollout\",state=\"" + state + "\"}";
}

TEST(RuntimeMetrics, FreshRegistryExposesEveryUnlabelledMetricWithJobLabel) {
  RuntimeMetrics m("j");
  std::string text = render(m);
  for (const char* name :
       {"tlt_rollout_tokens_total", "tlt_rollout_active_requests", "tlt_spec_accept_length",
        "tlt_drafter_version", "tlt_drafter_train_steps_total", "tlt_drafter_loss",
        "tlt_reclaimed_seconds_total", "tlt_idle_seconds_total", "tlt_rl_step",
        "tlt_rl_reward_mean", "tlt_tst_phase", "tlt_tst_loss", "tlt_tokens_seen_total"}) {
    EXPECT_NE(text.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
  }
  // Families with per-pod or per-arm labels have no series until first set.
  for (const char* name : {"tlt_worker_state", "tlt_gpu_busy_ratio", "tlt_drafter_assigned",
                           "tlt_spec_arm_selected_total", "tlt_rollout_phase_seconds_total"}) {
    EXPECT_EQ(text.find(name), std::string::npos) << name;
  }
  EXPECT_NE(text.find("# TYPE tlt_rollout_tokens_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE tlt_spec_accept_length histogram"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE tlt_rl_step gauge"), std::string::npos) << text;
  EXPECT_EQ(value_of(text, "tlt_rollout_tokens_total{job=\"j\"}"), 0);
  EXPECT_EQ(value_of(text, "tlt_rl_step{job=\"j\"}"), 0);
}

TEST(RuntimeMetrics, EverySampleCarriesTheJobLabel) {
  RuntimeMetrics m("the-job");
  ASSERT_TRUE(m.set_worker_state("pod-0", "rollout", "idle").ok());
  ASSERT_TRUE(m.set_gpu_busy_ratio("pod-0", 0.5).ok());
  ASSERT_TRUE(m.add_arm_selected("ngram").ok());
  ASSERT_TRUE(m.add_rollout_phase_seconds("verify", 0.5).ok());
  std::istringstream lines(render(m));
  std::string line;
  std::set<std::string> names;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find('{')));
    EXPECT_NE(line.find("{job=\"the-job\""), std::string::npos) << line;
  }
  // 13 unlabelled families + 4 labelled, the histogram as _bucket, _count and _sum.
  EXPECT_EQ(names.size(), 19u);
}

TEST(RuntimeMetrics, SettersShowUpInRender) {
  RuntimeMetrics m("j");
  m.add_rollout_tokens(100);
  m.add_rollout_tokens(23);
  m.set_rollout_active_requests(7);
  m.set_drafter_version(3);
  m.add_drafter_train_steps(5);
  m.set_drafter_loss(1.25);
  ASSERT_TRUE(m.add_reclaimed_seconds(2.5).ok());
  ASSERT_TRUE(m.add_idle_seconds(0.5).ok());
  m.set_rl_step(42);
  m.set_rl_reward_mean(0.75);
  ASSERT_TRUE(m.set_tst_phase("recovery").ok());
  m.set_tst_loss(3.5);
  m.add_tokens_seen(4096);
  ASSERT_TRUE(m.set_gpu_busy_ratio("pod-0", 0.9).ok());
  ASSERT_TRUE(m.add_arm_selected("8_4_48").ok());
  ASSERT_TRUE(m.add_arm_selected("8_4_48").ok());
  ASSERT_TRUE(m.add_arm_selected("ngram").ok());

  std::string t = render(m);
  EXPECT_EQ(value_of(t, "tlt_rollout_tokens_total{job=\"j\"}"), 123);
  EXPECT_EQ(value_of(t, "tlt_rollout_active_requests{job=\"j\"}"), 7);
  EXPECT_EQ(value_of(t, "tlt_drafter_version{job=\"j\"}"), 3);
  EXPECT_EQ(value_of(t, "tlt_drafter_train_steps_total{job=\"j\"}"), 5);
  EXPECT_EQ(value_of(t, "tlt_drafter_loss{job=\"j\"}"), 1.25);
  EXPECT_EQ(value_of(t, "tlt_reclaimed_seconds_total{job=\"j\"}"), 2.5);
  EXPECT_EQ(value_of(t, "tlt_idle_seconds_total{job=\"j\"}"), 0.5);
  EXPECT_EQ(value_of(t, "tlt_rl_step{job=\"j\"}"), 42);
  EXPECT_EQ(value_of(t, "tlt_rl_reward_mean{job=\"j\"}"), 0.75);
  EXPECT_EQ(value_of(t, "tlt_tst_phase{job=\"j\"}"), 2);
  EXPECT_EQ(value_of(t, "tlt_tst_loss{job=\"j\"}"), 3.5);
  EXPECT_EQ(value_of(t, "tlt_tokens_seen_total{job=\"j\"}"), 4096);
  EXPECT_EQ(value_of(t, "tlt_gpu_busy_ratio{job=\"j\",pod=\"pod-0\"}"), 0.9);
  m.set_drafter_assigned("pod-2", true);
  m.set_drafter_assigned("pod-3", true);
  m.set_drafter_assigned("pod-3", false);
  t = render(m);
  EXPECT_EQ(value_of(t, "tlt_drafter_assigned{job=\"j\",pod=\"pod-2\"}"), 1);
  EXPECT_EQ(value_of(t, "tlt_drafter_assigned{job=\"j\",pod=\"pod-3\"}"), 0);
  EXPECT_EQ(value_of(t, "tlt_spec_arm_selected_total{job=\"j\",arm=\"8_4_48\"}"), 2);
  EXPECT_EQ(value_of(t, "tlt_spec_arm_selected_total{job=\"j\",arm=\"ngram\"}"), 1);
  ASSERT_TRUE(m.add_rollout_phase_seconds("verify", 1.5).ok());
  ASSERT_TRUE(m.add_rollout_phase_seconds("verify", 0.25).ok());
  ASSERT_TRUE(m.add_rollout_phase_seconds("plain", 2.0).ok());
  t = render(m);
  EXPECT_NE(t.find("# TYPE tlt_rollout_phase_seconds_total counter"), std::string::npos) << t;
  EXPECT_EQ(value_of(t, "tlt_rollout_phase_seconds_total{job=\"j\",phase=\"verify\"}"), 1.75);
  EXPECT_EQ(value_of(t, "tlt_rollout_phase_seconds_total{job=\"j\",phase=\"plain\"}"), 2.0);
}

TEST(RuntimeMetrics, TstPhaseValues) {
  RuntimeMetrics m("j");
  ASSERT_TRUE(m.set_tst_phase("superposition").ok());
  EXPECT_EQ(value_of(render(m), "tlt_tst_phase{job=\"j\"}"), 1);
  ASSERT_TRUE(m.set_tst_phase("recovery").ok());
  EXPECT_EQ(value_of(render(m), "tlt_tst_phase{job=\"j\"}"), 2);
  ASSERT_TRUE(m.set_tst_phase("baseline").ok());
  EXPECT_EQ(value_of(render(m), "tlt_tst_phase{job=\"j\"}"), 0);
  Status s = m.set_tst_phase("warmup");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("superposition, recovery or baseline"), std::string::npos)
      << s.message();
}

TEST(RuntimeMetrics, WorkerStateIsOneHotAndSwitches) {
  RuntimeMetrics m("j");
  ASSERT_TRUE(m.set_worker_state("pod-0", "rollout", "generating").ok());
  ASSERT_TRUE(m.set_worker_state("pod-1", "rollout", "idle").ok());
  std::string t = render(m);
  EXPECT_EQ(value_of(t, state_series("pod-0", "generating")), 1);
  EXPECT_EQ(value_of(t, state_series("pod-0", "idle")), 0);
  EXPECT_EQ(value_of(t, state_series("pod-0", "released")), 0);
  EXPECT_EQ(value_of(t, state_series("pod-0", "training")), 0);
  EXPECT_EQ(value_of(t, state_series("pod-1", "idle")), 1);

  for (const char* next : {"released", "training", "idle", "generating"}) {
    ASSERT_TRUE(m.set_worker_state("pod-0", "rollout", next).ok());
    t = render(m);
    double sum = 0;
    for (const char* s : kWorkerStates) {
      double v = value_of(t, state_series("pod-0", s));
      EXPECT_EQ(v, std::string(s) == next ? 1 : 0) << "after switching to " << next << ": " << s;
      sum += v;
    }
    EXPECT_EQ(sum, 1);
    EXPECT_EQ(value_of(t, state_series("pod-1", "idle")), 1) << "other pods are untouched";
  }

  Status bad = m.set_worker_state("pod-0", "rollout", "sleeping");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("sleeping"), std::string::npos) << bad.message();
  EXPECT_EQ(value_of(render(m), state_series("pod-0", "generating")), 1) << "unchanged";
  EXPECT_FALSE(has_series(render(m), state_series("pod-0", "sleeping")));
}

TEST(RuntimeMetrics, ConcurrentSwitchesLeaveExactlyOneState) {
  RuntimeMetrics m("j");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 500; ++i) {
        Status s = m.set_worker_state("pod-0", "rollout", kWorkerStates[(t + i) % 4]);
        if (!s.ok()) ADD_FAILURE() << s.to_string();
        m.add_rollout_tokens(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::string t = render(m);
  double sum = 0;
  for (const char* s : kWorkerStates) sum += value_of(t, state_series("pod-0", s));
  EXPECT_EQ(sum, 1);
  EXPECT_EQ(value_of(t, "tlt_rollout_tokens_total{job=\"j\"}"), 2000);
}

TEST(RuntimeMetrics, AcceptLengthHistogramBuckets) {
  RuntimeMetrics m("j");
  for (double x : {1.0, 1.0, 2.0, 3.5, 10.0, 12.0}) ASSERT_TRUE(m.observe_accept_length(x).ok());
  std::string t = render(m);
  auto bucket = [&](const std::string& le) {
    return value_of(t, "tlt_spec_accept_length_bucket{job=\"j\",le=\"" + le + "\"}");
  };
  EXPECT_EQ(bucket("1"), 2);
  EXPECT_EQ(bucket("2"), 3);
  EXPECT_EQ(bucket("3"), 3);
  EXPECT_EQ(bucket("4"), 4);
  EXPECT_EQ(bucket("9"), 4);
  EXPECT_EQ(bucket("10"), 5);
  EXPECT_EQ(bucket("+Inf"), 6);
  EXPECT_EQ(value_of(t, "tlt_spec_accept_length_count{job=\"j\"}"), 6);
  EXPECT_DOUBLE_EQ(value_of(t, "tlt_spec_accept_length_sum{job=\"j\"}"), 29.5);
  EXPECT_FALSE(has_series(t, "tlt_spec_accept_length_bucket{job=\"j\",le=\"11\"}"));
}

TEST(RuntimeMetrics, InvalidInputsAreRefusedAndLeaveValuesUnchanged) {
  RuntimeMetrics m("j");
  EXPECT_EQ(m.observe_accept_length(0.5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.observe_accept_length(std::nan("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.add_reclaimed_seconds(-1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.add_idle_seconds(std::numeric_limits<double>::infinity()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(m.set_gpu_busy_ratio("pod-0", 1.5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.set_gpu_busy_ratio("pod-0", std::nan("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.add_arm_selected("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.add_rollout_phase_seconds("", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.add_rollout_phase_seconds("verify", -1).code(), StatusCode::kInvalidArgument);
  std::string t = render(m);
  EXPECT_EQ(value_of(t, "tlt_spec_accept_length_count{job=\"j\"}"), 0);
  EXPECT_EQ(value_of(t, "tlt_reclaimed_seconds_total{job=\"j\"}"), 0);
  EXPECT_EQ(value_of(t, "tlt_idle_seconds_total{job=\"j\"}"), 0);
  EXPECT_FALSE(has_series(t, "tlt_gpu_busy_ratio{job=\"j\",pod=\"pod-0\"}"));
  EXPECT_FALSE(has_series(t, "tlt_rollout_phase_seconds_total{job=\"j\",phase=\"verify\"}"));
}

// ---------------------------------------------------------------------------------------------
// The server, over a plain TCP socket.

// GET `path` from 127.0.0.1:port with HTTP/1.0; returns the whole response ("" on failure).
std::string http_get(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{5, 0};  // a hung server fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, n);
    }
  }
  close(fd);
  return response;
}

TEST(MetricsServer, ServesMetricsOnAFreePort) {
  RuntimeMetrics m("served-job");
  m.set_rl_step(17);
  ASSERT_TRUE(m.set_worker_state("pod-3", "trainer", "training").ok());
  StatusOr<std::unique_ptr<Server>> server = serve(m, 0, "127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  int port = (*server)->port();
  EXPECT_GT(port, 0);

  std::string response = http_get(port, "/metrics");
  ASSERT_EQ(response.rfind("HTTP/1.", 0), 0u) << response;
  EXPECT_NE(response.find(" 200 "), std::string::npos) << response.substr(0, 200);
  size_t body = response.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  std::string text = response.substr(body + 4);
  EXPECT_EQ(value_of(text, "tlt_rl_step{job=\"served-job\"}"), 17);
  EXPECT_EQ(value_of(text,
                     "tlt_worker_state{job=\"served-job\",pod=\"pod-3\",role=\"trainer\","
                     "state=\"training\"}"),
            1);

  // Later updates show up in the next scrape.
  m.set_rl_step(18);
  text = http_get(port, "/metrics");
  EXPECT_NE(text.find("\ntlt_rl_step{job=\"served-job\"} 18\n"), std::string::npos) << text;

  // Stopping the server closes the port.
  server.value().reset();
  EXPECT_EQ(http_get(port, "/metrics"), "");
}

TEST(MetricsServer, PortInUseIsUnavailableNamingPortAndFix) {
  RuntimeMetrics m("j");
  StatusOr<std::unique_ptr<Server>> first = serve(m, 0, "127.0.0.1");
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  int port = (*first)->port();

  StatusOr<std::unique_ptr<Server>> second = serve(m, port, "127.0.0.1");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  const std::string& msg = second.status().message();
  EXPECT_NE(msg.find(std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find("spec.metrics.port"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in use"), std::string::npos) << msg;
  // The first server still answers.
  EXPECT_NE(http_get(port, "/metrics").find("tlt_rl_step"), std::string::npos);
}

TEST(MetricsServer, PortTakenByAnotherProcessSocketOnAllAddresses) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);

  RuntimeMetrics m("j");
  StatusOr<std::unique_ptr<Server>> s = serve(m, port);
  close(fd);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("0.0.0.0:" + std::to_string(port)), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("in use"), std::string::npos) << s.status().message();
}

TEST(MetricsServer, BadArgumentsAreInvalid) {
  RuntimeMetrics m("j");
  EXPECT_EQ(serve(m, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(serve(m, 65536).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(serve(m, 0, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(serve(m, 0, "localhost").status().code(), StatusCode::kInvalidArgument);
  Status v6 = serve(m, 0, "::1").status();
  EXPECT_EQ(v6.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(v6.message().find("IPv4"), std::string::npos) << v6.message();
}

TEST(MetricsServer, AddressNotOnThisMachineIsUnavailable) {
  RuntimeMetrics m("j");
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): documentation only, never a local address.
  StatusOr<std::unique_ptr<Server>> s = serve(m, 0, "192.0.2.1");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("192.0.2.1:0"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("not on this machine"), std::string::npos)
      << s.status().message();
}

TEST(MetricsServer, OutlivingTheMetricsServesAnEmptyPage) {
  auto m = std::make_unique<RuntimeMetrics>("j");
  StatusOr<std::unique_ptr<Server>> server = serve(*m, 0, "127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  m.reset();
  std::string response = http_get((*server)->port(), "/metrics");
  EXPECT_NE(response.find(" 200 "), std::string::npos) << response;
  EXPECT_EQ(response.find("tlt_"), std::string::npos) << response;
}

TEST(MetricsServer, AwaitScrapeWaitsForAScrapeThatStartsAfterTheCall) {
  using std::chrono::milliseconds;
  RuntimeMetrics m("j");
  StatusOr<std::unique_ptr<Server>> server = serve(m, 0, "127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  Server& s = **server;
  int port = s.port();
  EXPECT_EQ(s.scrapes(), 0);
  EXPECT_EQ(s.last_scrape_interval().count(), 0);

  // A scrape before the call does not count: with nobody scraping, the wait times out.
  ASSERT_NE(http_get(port, "/metrics").find("tlt_rl_step"), std::string::npos);
  EXPECT_EQ(s.scrapes(), 1);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(s.await_scrape(milliseconds(300)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(300));

  // The final update, then a scrape 200 ms into the wait: the wait ends with it, and that
  // scrape read the final value.
  m.set_rl_step(99);
  std::future<std::string> later = std::async(std::launch::async, [port] {
    std::this_thread::sleep_for(milliseconds(200));
    return http_get(port, "/metrics");
  });
  t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(s.await_scrape(milliseconds(10000)));
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, milliseconds(150));
  EXPECT_LT(waited, milliseconds(5000));
  EXPECT_NE(later.get().find("\ntlt_rl_step{job=\"j\"} 99\n"), std::string::npos);
  EXPECT_EQ(s.scrapes(), 2);
  EXPECT_GE(s.last_scrape_interval(), milliseconds(300));
}

TEST(MetricsServer, FinalScrapeWaitFollowsTheScrapeInterval) {
  using std::chrono::milliseconds;
  RuntimeMetrics m("j");
  StatusOr<std::unique_ptr<Server>> server = serve(m, 0, "127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  Server& s = **server;
  // Nobody scraping, or a single scrape (no interval yet): no wait.
  EXPECT_EQ(tlt::cli::final_scrape_wait(s).count(), 0);
  http_get(s.port(), "/metrics");
  EXPECT_EQ(tlt::cli::final_scrape_wait(s).count(), 0);
  std::this_thread::sleep_for(milliseconds(400));
  http_get(s.port(), "/metrics");
  milliseconds interval = s.last_scrape_interval();
  EXPECT_GE(interval, milliseconds(400));
  EXPECT_EQ(tlt::cli::final_scrape_wait(s), interval * 3 / 2 + milliseconds(500));
}

}  // namespace
}  // namespace tlt::metrics
