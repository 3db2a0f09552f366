// An in-memory KubeClient for unit tests of code that talks to the apiserver (the reconcilers).
//
// It keeps objects per resource, namespace and name, and behaves like the apiserver where the
// callers depend on it: resourceVersion goes up on every write; metadata.generation goes up when
// spec changes; create of a taken name is AlreadyExists; apply creates or merges (a JSON merge
// patch of the applied fields, which is what server-side apply does for the fields one manager
// owns); patch honours a metadata.resourceVersion precondition (Aborted); remove of an object
// with finalizers only sets deletionTimestamp, and the object goes once its finalizers are
// patched away. It has no garbage collector (neither does a bare kube-apiserver), no admission
// and no schema. watch() is not supported (Unimplemented): reconcilers never watch.
//
// Every call is counted per verb and resource ("apply pods", "patch_status rljobs"), and a test
// can make the next call of a verb fail with fail_next().
//
// Thread safety: all methods may be called concurrently (one mutex).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kube/client.h"

namespace tlt::kube {

class FakeKubeClient : public KubeClient {
 public:
  FakeKubeClient() = default;
  FakeKubeClient(const FakeKubeClient&) = delete;
  FakeKubeClient& operator=(const FakeKubeClient&) = delete;

  StatusOr<nlohmann::json> get(const Resource& r, const std::string& name) override;
  StatusOr<ObjectList> list(const Resource& r, const ListOptions& options) override;
  StatusOr<nlohmann::json> create(const Resource& r, const nlohmann::json& object) override;
  StatusOr<nlohmann::json> apply(const Resource& r, const nlohmann::json& object,
                                 const std::string& field_manager) override;
  StatusOr<nlohmann::json> patch_status(const Resource& r, const std::string& name,
                                        const nlohmann::json& status,
                                        const std::string& resource_version = "") override;
  StatusOr<nlohmann::json> patch(const Resource& r, const std::string& name,
                                 const nlohmann::json& patch) override;
  Status remove(const Resource& r, const std::string& name) override;
  Status watch(const Resource& r, const WatchOptions& options,
               const std::function<bool(const WatchEvent&)>& on_event) override;

  // Test helpers. `verb` is one of get, list, create, apply, patch_status, patch, remove.
  // Calls of `verb` on `plural` so far ("" plural: on any resource).
  int calls(const std::string& verb, const std::string& plural = "") const;
  void reset_calls();
  // The next call of `verb` (on any resource) returns `status` instead of doing anything.
  void fail_next(const std::string& verb, Status status);
  // Stores `object` as is (a test's way to set a pod's status.phase, say); creates or replaces.
  void put(const Resource& r, const nlohmann::json& object);
  // The stored objects of `r` (its namespace; "" for all), sorted by namespace and name.
  std::vector<nlohmann::json> objects(const Resource& r) const;
  // Field managers that applied (plural/namespace/name -> manager), for assertions.
  std::map<std::string, std::string> appliers() const;

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // group/version/plural, ns, name
  static std::string type_of(const Resource& r) {
    return r.group + "/" + r.version + "/" + r.plural;
  }
  // Counts the call and consumes an injected failure; Ok when the call should go ahead.
  Status enter(const std::string& verb, const Resource& r);
  nlohmann::json& store(const Resource& r, nlohmann::json object);  // bumps resourceVersion

  mutable std::mutex mu_;
  std::map<Key, nlohmann::json> objects_;        // guarded by mu_
  std::map<std::string, int> calls_;             // "verb plural" -> n; guarded by mu_
  std::map<std::string, Status> failures_;       // verb -> next failure; guarded by mu_
  std::map<std::string, std::string> appliers_;  // guarded by mu_
  int64_t resource_version_ = 0;                 // guarded by mu_
  int64_t uid_ = 0;                              // guarded by mu_
};

// Whether `object`'s metadata.labels match a label selector of "k=v", "k!=v" and "k" terms
// separated by commas (the subset the operator uses).
bool labels_match(const nlohmann::json& object, const std::string& selector);

}  // namespace tlt::kube
