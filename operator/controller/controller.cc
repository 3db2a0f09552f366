// Informers -> cache + work queue -> reconcile workers.
#include "operator/controller/controller.h"

#include <algorithm>
#include <optional>

#include "operator/controller/desired.h"
#include "operator/controller/events.h"
#include "operator/controller/informer.h"
#include "operator/controller/job.h"
#include "operator/controller/kueue.h"
#include "operator/controller/log.h"
#include "operator/controller/reconciler.h"

namespace tlt::controller {

using Json = nlohmann::json;

struct Controller::Shared {
  std::shared_ptr<kube::KubeClient> client;
  std::shared_ptr<OperatorMetrics> metrics;
  ControllerOptions options;
  RealClock clock;
  WorkQueue queue;
  Cache cache;
  AsyncEventRecorder events;
  Reconciler reconciler;
  std::atomic<bool> stopping{false};

  Shared(std::shared_ptr<kube::KubeClient> c, std::shared_ptr<OperatorMetrics> m,
         ControllerOptions o)
      : client(std::move(c)),
        metrics(std::move(m)),
        options(std::move(o)),
        queue(options.rate),
        cache(options.kueue),
        events(client, &clock, kFieldManager),
        reconciler(client.get(), &cache, &events, &clock,
                   ReconcilerOptions{options.pod, options.max_parallel_creates, options.kueue,
                                     options.pods_pending_timeout}) {}
};

namespace {

using KeyOf = std::function<std::optional<std::string>(const Json&)>;

const Json* metadata_of(const Json& o) {
  if (!o.is_object()) return nullptr;
  auto it = o.find("metadata");
  return it != o.end() && it->is_object() ? &*it : nullptr;
}

// The key of a job object of `kind`.
KeyOf job_key_of(const std::string& kind) {
  return [kind](const Json& o) -> std::optional<std::string> {
    const Json* meta = metadata_of(o);
    if (!meta) return std::nullopt;
    return job_key(kind, meta->value("namespace", ""), meta->value("name", ""));
  };
}

// The key of the job that controls an owned object (pod, Service, ConfigMap).
std::optional<std::string> owner_key(const Json& o) {
  const Json* meta = metadata_of(o);
  if (!meta) return std::nullopt;
  for (const Json& ref : meta->value("ownerReferences", Json::array())) {
    if (!ref.value("controller", false)) continue;
    std::string kind = ref.value("kind", "");
    const auto& kinds = job_kinds();
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) continue;
    return job_key(kind, meta->value("namespace", ""), ref.value("name", ""));
  }
  return std::nullopt;
}

void worker_loop(std::shared_ptr<Controller::Shared> s) {
  // Reconciling from a cache that has not listed yet would act on a partial picture.
  while (!s->stopping && !s->cache.not_synced().empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string key;
  while (s->queue.get(&key)) {
    auto t0 = std::chrono::steady_clock::now();
    ReconcileResult r = s->reconciler.reconcile(key);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string kind = key.substr(0, key.find('/'));
    s->metrics->observe_reconcile(kind, r.status.ok(), secs);
    if (r.status.ok()) {
      s->metrics->set_job_phase(key, kind, r.phase);
      s->queue.forget(key);
      if (r.requeue_after) s->queue.add_after(key, *r.requeue_after);
    } else {
      s->queue.add_rate_limited(key);
      log_error("Reconcile failed; retrying with backoff.",
                {{"key", key},
                 {"error", r.status.to_string()},
                 {"failures", std::to_string(s->queue.failures(key))}});
    }
    s->queue.done(key);
  }
}

}  // namespace

Controller::Controller(std::shared_ptr<kube::KubeClient> client,
                       std::shared_ptr<OperatorMetrics> metrics, ControllerOptions options)
    : shared_(std::make_shared<Shared>(std::move(client), std::move(metrics), std::move(options))) {
  std::weak_ptr<Shared> weak = shared_;
  shared_->metrics->set_depth_source([weak]() -> double {
    auto s = weak.lock();
    return s ? static_cast<double>(s->queue.depth()) : 0.0;
  });
}

Controller::~Controller() {
  stop();
}

void Controller::start() {
  if (started_) return;
  started_ = true;
  const std::string& ns = shared_->options.namespace_;
  struct Watch {
    kube::Resource r;
    std::string selector;
    KeyOf key_of;
    std::chrono::milliseconds delay;
    bool after_jobs;  // starts once the job stores have listed (their admission needs the jobs)
  };
  std::vector<Watch> watches;
  for (const std::string& kind : job_kinds())
    watches.push_back({job_resource(kind, ns), "", job_key_of(kind), {}, false});
  for (const kube::Resource& r : owned_resources(ns))
    watches.push_back({r, owned_selector(), owner_key, shared_->options.owned_event_delay, true});
  if (shared_->options.kueue) {
    watches.push_back({workload_resource(ns), owned_selector(), owner_key,
                       shared_->options.owned_event_delay, true});
  }
  for (Watch& w : watches) {
    InformerOptions io{w.r, w.selector, shared_->options.watch_timeout_seconds};
    std::thread([s = shared_, io, key_of = w.key_of, delay = w.delay, after = w.after_jobs] {
      while (after && !s->stopping && !s->cache.jobs_synced())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      run_informer(
          s->client.get(), s->cache.store(io.resource.plural), io,
          [&](const Json& o) {
            if (auto key = key_of(o)) s->queue.add_after(*key, delay);
          },
          s->metrics.get(), s->stopping);
    }).detach();
  }
  for (int i = 0; i < std::max(1, shared_->options.workers); ++i)
    workers_.emplace_back(worker_loop, shared_);
  log_info("Controller started.", {{"namespace", ns.empty() ? "(all)" : ns},
                                   {"workers", std::to_string(workers_.size())}});
}

void Controller::stop() {
  shared_->stopping = true;
  shared_->queue.shut_down();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
  shared_->events.shut_down(std::chrono::seconds(1));  // the last decisions' Events
}

std::string Controller::not_ready() const {
  if (!started_) return "the controller has not started (waiting for leadership?)";
  std::string waiting = shared_->cache.not_synced();
  return waiting.empty() ? "" : "the cache has not listed " + waiting + " yet";
}

const Cache& Controller::cache() const {
  return shared_->cache;
}

}  // namespace tlt::controller
