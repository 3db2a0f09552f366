// The reconciler tests' fixture: an in-memory KubeClient (kube/fake_client.h) with a create()
// hook, an informer cache filled from it by a list before each pass (as the informers would;
// tests of a stale cache skip that), a fake clock, and the examples as the apiserver stores them.
// Used by reconciler_test.cc, reconciler_failures_test.cc and reconciler_progress_test.cc.
#pragma once

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>

#include "api/encode.h"
#include "api/manifest.h"
#include "kube/fake_client.h"
#include "operator/controller/log.h"
#include "operator/controller/pod_template.h"
#include "operator/controller/reconciler.h"

namespace tlt::controller::test {

using Json = nlohmann::json;

inline std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// An example manifest as the apiserver would store it: defaults filled in, no status.
inline Json example(const std::string& file) {
  StatusOr<api::Job> job =
      api::parse_job_yaml(read(std::string(TLT_SOURCE_DIR) + "/examples/" + file));
  EXPECT_TRUE(job.ok()) << job.status().to_string();
  Json j = std::visit([](const auto& x) { return api::to_json(x); }, job.value());
  j.erase("status");
  return j;
}

// The fake apiserver, with a hook a test may set to run (and throw) inside create().
class HookedKubeClient : public kube::FakeKubeClient {
 public:
  StatusOr<Json> create(const kube::Resource& r, const Json& object) override {
    if (on_create) on_create(r, object);
    return FakeKubeClient::create(r, object);
  }
  std::function<void(const kube::Resource&, const Json&)> on_create;  // set before reconciling
};

class ReconcilerTest : public ::testing::Test {
 protected:
  ReconcilerTest()
      : clock_(std::chrono::system_clock::from_time_t(1700000000)),
        events_(&kube_, &clock_, "tlt-operator"),
        reconciler_(
            &kube_, &cache_, &events_, &clock_,
            ReconcilerOptions{PodOptions{"registry.example/tlt:test", 29500, {}, {}, {}}, 4}) {
    set_log_sink([this](const std::string& line) { logs_.push_back(line); });
  }
  ~ReconcilerTest() override { set_log_sink(nullptr); }

  // Stores `job` and returns its key.
  std::string add(const Json& job) {
    std::string kind = job["kind"], ns = job["metadata"]["namespace"],
                name = job["metadata"]["name"];
    kube_.put(job_resource(kind, ns), job);
    return job_key(kind, ns, name);
  }
  // Fills the cache from the fake apiserver, as the informers' lists would.
  void sync() {
    // The jobs first: the owned types' stores admit only children of known jobs.
    std::vector<kube::Resource> all = {job_resource("RLJob", ""),
                                       job_resource("TSTPretrainJob", "")};
    for (const kube::Resource& r : owned_resources("")) all.push_back(r);
    for (const kube::Resource& r : all) {
      kube::ListOptions lo;
      if (r.group != api::kGroup)
        lo.label_selector = owned_selector();  // the owned types, as the informers
      StatusOr<kube::ObjectList> list = kube_.list(r, lo);
      ASSERT_TRUE(list.ok()) << list.status().to_string();
      cache_.store(r.plural)->replace(list->items, list->resource_version);
    }
  }
  // A pass on a synced cache; fails the test unless it returns OK.
  ReconcileResult reconcile(const std::string& key) {
    ReconcileResult r = reconcile_synced(key);
    EXPECT_TRUE(r.status.ok()) << r.status.to_string();
    return r;
  }
  ReconcileResult reconcile_synced(const std::string& key) {
    sync();
    return reconciler_.reconcile(key);
  }
  Json job(const std::string& key) {
    std::string kind, ns, name;
    parse_key(key, &kind, &ns, &name);
    StatusOr<Json> j = kube_.get(job_resource(kind, ns), name);
    return j.ok() ? *j : Json();
  }
  // Edits the stored job's spec with a merge patch (generation goes up, as on an apiserver).
  void edit(const std::string& key, const Json& spec_patch) {
    Json j = job(key);
    j["spec"].merge_patch(spec_patch);
    std::string kind = j["kind"];
    kube_.put(job_resource(kind, j["metadata"]["namespace"]), j);
  }
  std::vector<std::string> pod_names(const std::string& ns, bool include_deleting = false) {
    std::vector<std::string> names;
    for (const Json& p : kube_.objects(pod_resource(ns))) {
      if (!include_deleting && p["metadata"].contains("deletionTimestamp")) continue;
      names.push_back(p["metadata"]["name"]);
    }
    return names;
  }
  // Sets the phase of every pod in `ns` whose name starts with `prefix` (Running also Ready).
  void set_phase(const std::string& ns, const std::string& prefix, const std::string& phase) {
    for (Json p : kube_.objects(pod_resource(ns))) {
      std::string name = p["metadata"]["name"];
      if (name.rfind(prefix, 0) != 0) continue;
      p["status"] = {{"phase", phase}};
      if (phase == "Running") p["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
      kube_.put(pod_resource(ns), p);
    }
  }
  // Sets (or, with "", removes) a pod's tlt.dev/progress annotation, as the runtime would.
  void annotate(const std::string& ns, const std::string& pod, const std::string& progress) {
    StatusOr<Json> p = kube_.get(pod_resource(ns), pod);
    ASSERT_TRUE(p.ok()) << pod;
    if (progress.empty()) {
      (*p)["metadata"]["annotations"].erase(kProgressAnnotation);
    } else {
      (*p)["metadata"]["annotations"][kProgressAnnotation] = progress;
    }
    kube_.put(pod_resource(ns), *p);
  }
  int count_logs(const std::string& needle) const {
    return static_cast<int>(std::count_if(logs_.begin(), logs_.end(), [&](const std::string& l) {
      return l.find(needle) != std::string::npos;
    }));
  }
  int events_with_reason(const std::string& ns, const std::string& reason) {
    int n = 0;
    for (const Json& e : kube_.objects(event_resource(ns))) n += e["reason"] == reason;
    return n;
  }
  std::string condition(const Json& j, const std::string& type, const std::string& field) {
    for (const Json& c : j["status"]["conditions"]) {
      if (c["type"] == type) return c.value(field, "");
    }
    return "(none)";
  }
  std::vector<std::string> deleted_in_order() {
    std::vector<std::string> out;
    for (const std::string& l : logs_) {
      size_t at = l.find(" pod=");
      if (l.find("msg=\"Deleted a pod.\"") == std::string::npos || at == std::string::npos)
        continue;
      out.push_back(l.substr(at + 5, l.find(' ', at + 5) - at - 5));
    }
    return out;
  }

  HookedKubeClient kube_;
  FakeClock clock_;
  Cache cache_;
  SyncEventRecorder events_;
  Reconciler reconciler_;
  std::vector<std::string> logs_;
};

}  // namespace tlt::controller::test
