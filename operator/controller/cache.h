// The informer cache the reconciler reads instead of the apiserver (controller-runtime's
// cache.Cache): one ObjectStore per resource type (rljobs, tstpretrainjobs, pods, services,
// configmaps), filled by list + watch (informer.h), indexed by namespace/name and by the
// tlt.dev/job label (which every owned object carries).
//
// Staleness. A watch lags the writes that caused it, so a store could show a pod the reconciler
// just deleted as alive, or miss one it just created (and a job's status from before its own
// last patch, which would lose restart counts). What the reconciler writes is therefore written
// through: the apiserver's answer to a create, apply or patch goes into the store at once, and a
// delete marks the object as being deleted (metadata.deletionTimestamp) until the watch says it
// is gone. An event or a list older than what a store holds never replaces it. "Older" compares
// metadata.resourceVersion as integers, which etcd-backed apiservers use; where either version is
// not an integer, the newcomer wins. The work queue never hands one job to two workers, so the
// next pass over a job sees everything the previous one did.
//
// Other readers in the process (the rebalancer) read the same stores instead of listing.
//
// Memory. Each store keeps a trimmed copy (a Transform), packed as MessagePack and unpacked on
// every read (a parsed nlohmann::json takes about four times the space): managedFields and
// kubectl's last-applied annotation dropped; pods keep only what the reconciler reads (name, uid,
// resourceVersion, the tlt.dev labels, the controller ownerReference, deletionTimestamp, the
// tlt.dev/progress and tlt.dev/assignment annotations, status.phase and the Ready condition);
// services keep only
// metadata. About 0.5 KiB per pod and 6 KiB per job.
//
// Thread safety: every method of ObjectStore and Cache may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"

namespace tlt::controller {

// What a store keeps of an object (the object in, the trimmed copy out).
using Transform = std::function<nlohmann::json(const nlohmann::json&)>;

// The transforms of the cached types: full objects less managedFields (jobs, configmaps); pods
// and services as described at the top.
nlohmann::json trim_object(const nlohmann::json& object);
nlohmann::json trim_pod(const nlohmann::json& pod);
nlohmann::json trim_service(const nlohmann::json& service);

// Whether resourceVersion `a` is older than `b` (false when either is not an integer).
bool older_version(const std::string& a, const std::string& b);

// The objects of one resource type, by namespace and name.
class ObjectStore {
 public:
  explicit ObjectStore(Transform transform);
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // A list's items (taken at `resource_version`) replace the contents; a stored object newer
  // than its listed copy, or newer than the list and missing from it (written through since),
  // is kept. Makes the store synced().
  void replace(const std::vector<nlohmann::json>& items, const std::string& resource_version);
  // One watch event: ADDED and MODIFIED store the object unless the stored copy is as new or
  // newer; DELETED removes it unless the stored copy is newer (a recreated object of the same
  // name); other types are ignored.
  void apply(const kube::WatchEvent& event);
  // Write-through of what the apiserver returned for this process's create, apply or patch.
  void written(const nlohmann::json& object);
  // Write-through of this process's delete of namespace/name: the stored copy gets a
  // metadata.deletionTimestamp (kept until the watch reports the deletion).
  void deleted(const std::string& namespace_, const std::string& name);

  // The stored copy, or nullopt.
  std::optional<nlohmann::json> get(const std::string& namespace_, const std::string& name) const;
  // Every object of namespace_ ("" for all namespaces), sorted by namespace and name.
  std::vector<nlohmann::json> list(const std::string& namespace_) const;
  // The objects of namespace_ labelled tlt.dev/job=job, sorted by name.
  std::vector<nlohmann::json> by_job(const std::string& namespace_, const std::string& job) const;
  size_t size() const;
  bool synced() const;

 private:
  using Key = std::pair<std::string, std::string>;  // namespace, name
  struct Entry {
    std::string version;               // metadata.resourceVersion
    std::string job;                   // the tlt.dev/job label; "" when none
    std::vector<std::uint8_t> packed;  // the trimmed object as MessagePack
  };
  static Entry pack(const nlohmann::json& trimmed);
  static nlohmann::json unpack(const Entry& entry);
  // Stores `entry` under `key`, keeping the job index current.
  void put_locked(const Key& key, Entry entry);
  void erase_locked(const Key& key);

  const Transform transform_;

  mutable std::mutex mu_;
  std::map<Key, Entry> objects_;                 // guarded by mu_
  std::map<Key, std::set<std::string>> by_job_;  // (namespace, job label) -> names; guarded by mu_
  bool synced_ = false;                          // guarded by mu_
};

// The stores of every cached type, created up front (their set never changes).
class Cache {
 public:
  Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // The store of `plural` (rljobs, tstpretrainjobs, pods, services, configmaps); nullptr for
  // any other.
  ObjectStore* store(const std::string& plural) const;
  // "" once every store has been filled by a list, else the plurals still waiting.
  std::string not_synced() const;

  // Shorthands on the store of r.plural in r.namespace_ (nothing found, and no-ops, for a type
  // that is not cached).
  std::optional<nlohmann::json> get(const kube::Resource& r, const std::string& name) const;
  std::vector<nlohmann::json> by_job(const kube::Resource& r, const std::string& job) const;
  std::vector<nlohmann::json> list(const kube::Resource& r) const;
  void written(const kube::Resource& r, const nlohmann::json& object) const;
  void deleted(const kube::Resource& r, const std::string& name) const;

 private:
  std::map<std::string, std::unique_ptr<ObjectStore>> stores_;  // constant after construction
};

}  // namespace tlt::controller
