// bench_weight_sync: the time to publish a policy's weights to W local workers, three ways side
// by side in one run (each worker a thread with its own copy of the model, one intra-op thread,
// as rl-worker processes pinned to a core are):
//   file:    the driver writes the checkpoint (io::Sync::kNone), every worker loads it at once;
//   channel: the driver writes it and sends it to each worker in turn over a socket
//            (rl::Channel::mirror_files, a cluster pod's path); each worker loads its copy;
//   gloo:    the driver broadcasts it over the weight-sync group (runtime/rl/weight_sync.h,
//            buckets, checksums verified twice by each worker).
// A publish ends when the last worker holds the weights. Default model: SmolLM2-135M's shape
// with random weights (--model loads a real one where the build has tlt_pretrained).
// Usage: bench_weight_sync [--workers 2,4] [--repeats 3] [--bucket-mb 32] [--model PATH]
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/shapes.h"
#include "runtime/clock.h"
#include "runtime/cluster/job_secret.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/config.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/channel.h"
#include "runtime/rl/weight_publisher.h"
#include "runtime/rl/weight_sync.h"
#ifdef TLT_HAVE_PRETRAINED
#include "runtime/model/pretrained.h"
#endif

namespace {
namespace fs = std::filesystem;
using namespace tlt;

using runtime::now_s;

void check(const Status& s, const std::string& what) {
  bench::check_or_exit(s, "bench_weight_sync", what);
}

// Runs f(w) for w in [0, n) on n threads and joins them.
void on_threads(int n, const std::function<void(int)>& f) {
  std::vector<std::thread> ts;
  for (int w = 0; w < n; ++w) ts.emplace_back(f, w);
  for (std::thread& t : ts) t.join();
}

double publish_file(model::Transformer& policy, std::vector<model::Transformer>& workers,
                    const std::string& dir) {
  std::string path = dir + "/policy.ckpt";
  double t = now_s();
  check(model::save_checkpoint(*policy, path, "bench", io::Sync::kNone), "save");
  on_threads(int(workers.size()), [&](int w) {
    check(model::load_checkpoint(*workers[size_t(w)], path).status(), "load");
  });
  return now_s() - t;
}

double publish_channel(model::Transformer& policy, std::vector<model::Transformer>& workers,
                       const std::string& dir) {
  const int n = int(workers.size());
  std::vector<int> driver_fd(static_cast<size_t>(n)), worker_fd(static_cast<size_t>(n));
  for (int w = 0; w < n; ++w) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) check(Status::Internal("socketpair"), "");
    driver_fd[size_t(w)] = sv[0], worker_fd[size_t(w)] = sv[1];
    fs::create_directories(dir + "/w" + std::to_string(w));
  }
  double t = now_s();
  std::thread driver([&] {
    std::string path = dir + "/policy-v1.ckpt";  // a name the worker side takes
    check(model::save_checkpoint(*policy, path, "bench", io::Sync::kNone), "save");
    for (int w = 0; w < n; ++w) {  // one connection per worker, in turn (as WorkerPool::send)
      rl::Channel ch(driver_fd[size_t(w)], driver_fd[size_t(w)]);
      ch.mirror_files(dir, rl::driver_mirror_rules(w));
      check(ch.send({{"op", "generate"}, {"policy", path}}), "send");
    }
  });
  on_threads(n, [&](int w) {
    rl::Channel ch(worker_fd[size_t(w)], worker_fd[size_t(w)]);
    ch.mirror_files(dir + "/w" + std::to_string(w), rl::worker_mirror_rules());
    StatusOr<std::optional<nlohmann::json>> m = std::optional<nlohmann::json>();
    while (m.ok() && !*m) m = ch.receive(-1);  // file frames first, then the message
    check(m.status(), "receive");
    std::string path = (**m).at("policy").get<std::string>();
    check(model::load_checkpoint(*workers[size_t(w)], path).status(), "load");
  });
  driver.join();
  double s = now_s() - t;
  for (int w = 0; w < n; ++w) close(driver_fd[size_t(w)]), close(worker_fd[size_t(w)]);
  return s;
}

// The group is joined once per worker count (as a run joins once); each call is one publish.
struct GlooBench {
  std::vector<std::unique_ptr<rl::WeightSync>> ranks;  // [0]: the driver
  GlooBench(int workers, int64_t bucket_bytes) {
    ranks.resize(size_t(workers) + 1);
    rl::WeightSyncOptions o;
    o.world = workers + 1, o.bucket_bytes = bucket_bytes;
    // The proof a run's group carries (runtime/rl/weight_publisher.h), from a fresh secret.
    StatusOr<std::string> secret = cluster::generate_job_secret();
    check(secret.status(), "job secret");
    StatusOr<std::string> nonce = cluster::random_nonce();
    check(nonce.status(), "nonce");
    o.auth = rl::weight_sync_auth(*secret, 1, *nonce);
    StatusOr<std::unique_ptr<rl::WeightSync>> r0 = rl::WeightSync::open(o);
    check(r0.status(), "open rank 0");
    ranks[0] = std::move(*r0);
    o.port = ranks[0]->port();
    for (int r = 1; r <= workers; ++r) {
      o.rank = r;
      StatusOr<std::unique_ptr<rl::WeightSync>> s = rl::WeightSync::open(o);
      check(s.status(), "open");
      ranks[size_t(r)] = std::move(*s);
    }
    on_threads(workers + 1, [&](int r) { check(ranks[size_t(r)]->join(), "join"); });
  }
  double publish(model::Transformer& policy, std::vector<model::Transformer>& workers,
                 int64_t version) {
    double t = now_s();
    on_threads(int(ranks.size()), [&](int r) {
      if (r == 0)
        check(ranks[0]->publish(rl::WeightKind::kPolicy, version, rl::synced_tensors(*policy)),
              "publish");
      else
        check(ranks[size_t(r)]->receive(rl::WeightKind::kPolicy, version,
                                        rl::synced_tensors(*workers[size_t(r) - 1])),
              "receive");
    });
    return now_s() - t;
  }
};

model::Transformer make_policy(const std::string& path) {
  if (path.empty()) return model::Transformer(bench::smollm2_135m_shape());
#ifdef TLT_HAVE_PRETRAINED
  StatusOr<model::PretrainedModel> m = model::load_pretrained(path);
  check(m.status(), path);
  return m->model;
#else
  check(Status::Unimplemented("--model needs a build with tlt_pretrained"), path);
  return nullptr;
#endif
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_weight_sync: publish a policy to local workers, file vs channel vs gloo"};
  std::vector<int> counts{2, 4};
  int repeats = 3;
  int64_t bucket_mb = 32;
  std::string model_path, dir = fs::temp_directory_path().string() + "/tlt-weight-sync-bench";
  app.add_option("--workers", counts, "worker counts")->delimiter(',');
  app.add_option("--repeats", repeats, "publishes per method (median reported)");
  app.add_option("--bucket-mb", bucket_mb, "Gloo bucket size in MiB");
  app.add_option("--model", model_path, "a pretrained model (default: SmolLM2-135M's shape)");
  app.add_option("--dir", dir, "scratch directory for the checkpoint files");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  torch::NoGradGuard no_grad;
  fs::create_directories(dir);
  model::Transformer policy = make_policy(model_path);
  int64_t bytes = 0;
  for (const torch::Tensor& t : rl::synced_tensors(*policy)) bytes += t.numel() * t.element_size();
  std::printf("weights: %.1f MB (%s); bucket %lld MiB; median of %d publishes\n", bytes / 1e6,
              model_path.empty() ? "SmolLM2-135M shape, random" : model_path.c_str(),
              (long long)bucket_mb, repeats);
  std::printf("%8s %10s %10s %10s %14s %14s\n", "workers", "file s", "channel s", "gloo s",
              "channel/gloo", "file/gloo");
  for (int n : counts) {
    std::vector<model::Transformer> workers;
    for (int w = 0; w < n; ++w) workers.push_back(model::Transformer(policy->config()));
    std::vector<double> f, c, g;
    GlooBench gloo(n, bucket_mb << 20);
    for (int i = 0; i < repeats; ++i) {
      f.push_back(publish_file(policy, workers, dir));
      c.push_back(publish_channel(policy, workers, dir));
      g.push_back(gloo.publish(policy, workers, i));
    }
    double mf = median(f), mc = median(c), mg = median(g);
    std::printf("%8d %10.3f %10.3f %10.3f %14.2f %14.2f\n", n, mf, mc, mg, mc / mg, mf / mg);
    std::fflush(stdout);
  }
  fs::remove_all(dir);
  return 0;
}
