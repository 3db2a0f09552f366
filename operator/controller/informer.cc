// List, then watch from the list's version into the store; resume on a clean end, re-list on
// anything else.
#include "operator/controller/informer.h"

#include <chrono>
#include <thread>

#include "operator/controller/log.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

void sleep_unless_stopping(const std::atomic<bool>& stopping, std::chrono::seconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  while (!stopping && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace

void run_informer(kube::KubeClient* client, ObjectStore* store, const InformerOptions& options,
                  const std::function<void(const Json&)>& on_object, OperatorMetrics* metrics,
                  const std::atomic<bool>& stopping) {
  const kube::Resource& r = options.resource;
  std::chrono::seconds backoff(1);
  while (!stopping) {
    kube::ListOptions lo;
    lo.label_selector = options.label_selector;
    StatusOr<kube::ObjectList> list = client->list(r, lo);
    if (!list.ok()) {
      log_error("Listing failed; retrying.", {{"resource", r.plural},
                                              {"error", list.status().to_string()},
                                              {"retryIn", std::to_string(backoff.count()) + "s"}});
      sleep_unless_stopping(stopping, backoff);
      backoff = std::min(backoff * 2, std::chrono::seconds(30));
      continue;
    }
    store->replace(list->items, list->resource_version);
    for (const Json& item : list->items) on_object(item);
    log_info("Listed; watching from its resourceVersion.",
             {{"resource", r.plural},
              {"items", std::to_string(list->items.size())},
              {"resourceVersion", list->resource_version}});
    std::string rv = list->resource_version;
    list = kube::ObjectList{};  // not kept while watching
    metrics->declare_watch(r.plural);
    while (!stopping) {
      kube::WatchOptions wo;
      wo.resource_version = rv;
      wo.label_selector = options.label_selector;
      wo.timeout_seconds = options.watch_timeout_seconds;
      Status st = client->watch(r, wo, [&](const kube::WatchEvent& e) {
        auto meta = e.object.is_object() ? e.object.find("metadata") : e.object.end();
        if (meta != e.object.end() && meta->is_object()) rv = meta->value("resourceVersion", rv);
        if (e.type == "ADDED" || e.type == "MODIFIED" || e.type == "DELETED") {
          store->apply(e);
          on_object(e.object);
        }
        return !stopping.load();
      });
      if (st.ok()) {
        backoff = std::chrono::seconds(1);
        continue;  // the server ended the watch: resume from rv
      }
      bool gone = st.code() == StatusCode::kAborted;
      metrics->add_watch_restart(r.plural, gone ? "gone" : "error");
      log_error(gone ? "The watch's resourceVersion is too old; re-listing."
                     : "The watch failed; re-listing after a backoff.",
                {{"resource", r.plural},
                 {"error", st.to_string()},
                 {"retryIn", std::to_string(gone ? 0 : backoff.count()) + "s"}});
      if (!gone) {
        sleep_unless_stopping(stopping, backoff);
        backoff = std::min(backoff * 2, std::chrono::seconds(30));
      }
      break;
    }
  }
}

}  // namespace tlt::controller
