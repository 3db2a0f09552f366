// Watches -> work queue -> reconcile workers.
#include "operator/controller/controller.h"

#include <algorithm>
#include <optional>

#include "operator/controller/job.h"
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
  std::atomic<bool> stopping{false};
  std::atomic<int> unsynced{0};  // watches that have not listed yet

  Shared(std::shared_ptr<kube::KubeClient> c, std::shared_ptr<OperatorMetrics> m,
         ControllerOptions o)
      : client(std::move(c)), metrics(std::move(m)), options(std::move(o)), queue(options.rate) {}
};

namespace {

using KeyOf = std::function<std::optional<std::string>(const Json&)>;

// The key of a job object of `kind`.
KeyOf job_key_of(const std::string& kind) {
  return [kind](const Json& o) -> std::optional<std::string> {
    const Json& meta = o["metadata"];
    if (!meta.is_object()) return std::nullopt;
    return job_key(kind, meta.value("namespace", ""), meta.value("name", ""));
  };
}

// The key of the job that controls a pod.
std::optional<std::string> pod_owner_key(const Json& o) {
  const Json& meta = o["metadata"];
  if (!meta.is_object()) return std::nullopt;
  for (const Json& ref : meta.value("ownerReferences", Json::array())) {
    if (!ref.value("controller", false)) continue;
    std::string kind = ref.value("kind", "");
    const auto& kinds = job_kinds();
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) continue;
    return job_key(kind, meta.value("namespace", ""), ref.value("name", ""));
  }
  return std::nullopt;
}

void sleep_unless_stopping(const std::atomic<bool>& stopping, std::chrono::seconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  while (!stopping && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// List, then watch from the list's version; resume on a clean end, re-list on anything else.
void watch_loop(std::shared_ptr<Controller::Shared> s, kube::Resource r, std::string selector,
                KeyOf key_of) {
  bool synced = false;
  std::chrono::seconds backoff(1);
  while (!s->stopping) {
    kube::ListOptions lo;
    lo.label_selector = selector;
    StatusOr<kube::ObjectList> list = s->client->list(r, lo);
    if (!list.ok()) {
      log_error("Listing failed; retrying.", {{"resource", r.plural},
                                              {"error", list.status().to_string()},
                                              {"retryIn", std::to_string(backoff.count()) + "s"}});
      sleep_unless_stopping(s->stopping, backoff);
      backoff = std::min(backoff * 2, std::chrono::seconds(30));
      continue;
    }
    for (const Json& item : list->items) {
      if (auto key = key_of(item)) s->queue.add(*key);
    }
    if (!synced) {
      synced = true;
      --s->unsynced;
    }
    log_info("Listed; watching from its resourceVersion.",
             {{"resource", r.plural},
              {"items", std::to_string(list->items.size())},
              {"resourceVersion", list->resource_version}});
    std::string rv = list->resource_version;
    while (!s->stopping) {
      kube::WatchOptions wo;
      wo.resource_version = rv;
      wo.label_selector = selector;
      wo.timeout_seconds = s->options.watch_timeout_seconds;
      Status st = s->client->watch(r, wo, [&](const kube::WatchEvent& e) {
        const Json& meta = e.object["metadata"];
        if (meta.is_object() && meta.contains("resourceVersion"))
          rv = meta.value("resourceVersion", rv);
        if (e.type != "BOOKMARK") {
          if (auto key = key_of(e.object)) s->queue.add(*key);
        }
        return !s->stopping.load();
      });
      if (st.ok()) {
        backoff = std::chrono::seconds(1);
        continue;  // the server ended the watch: resume from rv
      }
      bool gone = st.code() == StatusCode::kAborted;
      s->metrics->add_watch_restart(r.plural, gone ? "gone" : "error");
      log_error(gone ? "The watch's resourceVersion is too old; re-listing."
                     : "The watch failed; re-listing after a backoff.",
                {{"resource", r.plural},
                 {"error", st.to_string()},
                 {"retryIn", std::to_string(gone ? 0 : backoff.count()) + "s"}});
      if (!gone) {
        sleep_unless_stopping(s->stopping, backoff);
        backoff = std::min(backoff * 2, std::chrono::seconds(30));
      }
      break;
    }
  }
}

void worker_loop(std::shared_ptr<Controller::Shared> s) {
  Reconciler reconciler(s->client.get(), &s->clock, s->options.pod);
  std::string key;
  while (s->queue.get(&key)) {
    auto t0 = std::chrono::steady_clock::now();
    ReconcileResult r = reconciler.reconcile(key);
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
  };
  std::vector<Watch> watches;
  for (const std::string& kind : job_kinds())
    watches.push_back({job_resource(kind, ns), "", job_key_of(kind)});
  watches.push_back({pod_resource(ns), kJobLabel, pod_owner_key});
  shared_->unsynced = static_cast<int>(watches.size());
  for (Watch& w : watches) {
    std::thread(watch_loop, shared_, w.r, w.selector, w.key_of).detach();
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
}

std::string Controller::not_ready() const {
  int n = shared_->unsynced.load();
  if (!started_) return "the controller has not started (waiting for leadership?)";
  return n > 0 ? std::to_string(n) + " watches have not listed yet" : "";
}

}  // namespace tlt::controller
