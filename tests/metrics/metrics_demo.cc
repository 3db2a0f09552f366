// metrics_demo: serves a RuntimeMetrics with known values on /metrics for a while, for the
// real-Prometheus scrape test (prometheus_scrape.sh).
//
// Usage: metrics_demo PORT_FILE [SECONDS] [PORT]
//   Serves on 127.0.0.1:PORT (default 0: a free port), writes the bound port to PORT_FILE once
//   it listens, exits 0 after SECONDS (default 60) or on SIGTERM/SIGINT, 1 on errors.
// The values (the scrape test checks them): job "demo-job"; tlt_rl_step 42;
// tlt_rl_reward_mean 0.75; tlt_rollout_tokens_total 1234; tlt_tst_phase 2 (recovery);
// worker pod-0/rollout "training", pod-1/rollout "generating"; accept lengths 1, 3, 3, 7;
// arm 8_4_48 chosen 3 times.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "runtime/metrics/metrics.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

tlt::Status fill(tlt::metrics::RuntimeMetrics& m) {
  m.set_rl_step(42);
  m.set_rl_reward_mean(0.75);
  m.add_rollout_tokens(1234);
  m.set_rollout_active_requests(5);
  m.set_drafter_version(2);
  m.add_drafter_train_steps(10);
  m.set_drafter_loss(2.5);
  m.set_tst_loss(3.25);
  m.add_tokens_seen(65536);
  TLT_RETURN_IF_ERROR(m.set_tst_phase("recovery"));
  TLT_RETURN_IF_ERROR(m.set_worker_state("pod-0", "rollout", "training"));
  TLT_RETURN_IF_ERROR(m.set_worker_state("pod-1", "rollout", "generating"));
  TLT_RETURN_IF_ERROR(m.set_gpu_busy_ratio("pod-0", 0.5));
  m.set_drafter_assigned("pod-1", true);
  TLT_RETURN_IF_ERROR(m.add_reclaimed_seconds(12.5));
  TLT_RETURN_IF_ERROR(m.add_idle_seconds(1.5));
  for (double x : {1.0, 3.0, 3.0, 7.0}) TLT_RETURN_IF_ERROR(m.observe_accept_length(x));
  for (int i = 0; i < 3; ++i) TLT_RETURN_IF_ERROR(m.add_arm_selected("8_4_48"));
  TLT_RETURN_IF_ERROR(m.add_rollout_phase_seconds("plain", 4.5));
  TLT_RETURN_IF_ERROR(m.add_rollout_phase_seconds("verify", 1.25));
  return tlt::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: metrics_demo PORT_FILE [SECONDS] [PORT]\n");
    return 1;
  }
  const std::string port_file = argv[1];
  const int seconds = argc > 2 ? std::atoi(argv[2]) : 60;
  const int port = argc > 3 ? std::atoi(argv[3]) : 0;

  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  tlt::metrics::RuntimeMetrics m("demo-job");
  tlt::Status filled = fill(m);
  if (!filled.ok()) {
    std::fprintf(stderr, "metrics_demo: %s\n", filled.to_string().c_str());
    return 1;
  }
  auto server = tlt::metrics::serve(m, port, "127.0.0.1");
  if (!server.ok()) {
    std::fprintf(stderr, "metrics_demo: %s\n", server.status().to_string().c_str());
    return 1;
  }
  {
    // Write then rename, so a reader never sees a half-written port.
    std::ofstream(port_file + ".tmp") << (*server)->port() << "\n";
    if (std::rename((port_file + ".tmp").c_str(), port_file.c_str()) != 0) {
      std::perror("metrics_demo: rename port file");
      return 1;
    }
  }
  std::printf("metrics_demo: serving http://127.0.0.1:%d/metrics for %d s\n", (*server)->port(),
              seconds);
  std::fflush(stdout);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!g_stop && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}
