// The informer cache the reconciler reads instead of the apiserver (controller-runtime's
// cache.Cache): one ObjectStore per resource type (the two job kinds and every owned type,
// owned_resources() in job.h), filled by list + watch (informer.h), indexed by namespace/name
// and by the tlt.dev/job label (which every owned object carries).
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
// Only the operator's own children. The stores of the owned types (pods, services, configmaps,
// serviceaccounts, roles, rolebindings, secrets, networkpolicies) are filled by informers that
// select owned_selector() (desired.h), and admit an object only when its controller ownerReference
// names a job in the job stores, with that job's uid (an object that stops being admitted leaves
// the store). So another user's object, labelled alike, costs nothing unless it names a live
// job's uid; and then no more than a trimmed copy. The informers of the owned types start once
// the job stores have listed (controller.cc).
//
// Strays. A watch that selects by label reports an object whose labels no longer match as
// DELETED (the apiserver's watch cache sends the object as it was, labels included, with the
// new resourceVersion), just as it reports a real deletion. So a DELETED child of a live job
// (controller ownerReference, uid included) whose deletion was not seen first (no
// deletionTimestamp on the event's object nor on the stored copy: the operator's own deletes
// mark it, deleted(), and graceful deletions show it) is a possible stray: a child that lost its
// labels. The store remembers its name and owner uid (at most kMaxStrays per store) until
// forget_stray(); the reconciler reads each by name (gone: forgotten; there: re-labelled, then
// reached by suspend, scale-down and deletion like any other child).
//
// Memory. Each store keeps a trimmed copy (a Transform), packed as MessagePack and unpacked on
// every read (a parsed nlohmann::json takes about four times the space). Jobs: the object less
// managedFields and kubectl's last-applied annotation. Children keep fixed fields only: metadata
// name, namespace, uid, resourceVersion, deletionTimestamp, the labels tlt.dev/job, tlt.dev/kind,
// tlt.dev/role, tlt.dev/index and managed-by, and the controller ownerReference; pods also the
// label tlt.dev/trainer-world, the tlt.dev/progress and tlt.dev/assignment annotations,
// status.phase and the Ready condition; creationTimestamp and a False PodScheduled condition
// (reason, message cut to 300 bytes: pods_pending.h);
// every other owned type, in place of its content, `digest`: a hash of the fields the reconciler
// compares (child_digest()). So a child's size in the store does not follow its data or its other
// labels and annotations: about 0.5 KiB per pod and 6 KiB per job.
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

// Whether a store keeps an object (the object as listed or watched, untrimmed).
using Admit = std::function<bool(const nlohmann::json&)>;

// The transforms of the cached types, as described at the top: jobs (trim_object), pods
// (trim_pod) and the other owned types of `plural` (trim_child).
nlohmann::json trim_object(const nlohmann::json& object);
nlohmann::json trim_pod(const nlohmann::json& pod);
nlohmann::json trim_child(const std::string& plural, const nlohmann::json& object);
// A Kueue Workload (kueue.h): the metadata a child keeps, spec.queueName and spec.podSets, and
// status.conditions and status.admission (what the reconciler reads; about 2 KiB).
nlohmann::json trim_workload(const nlohmann::json& object);
// The hash (16 hex digits) of what the reconciler compares of a child of `plural`, the same for
// a desired object and the stored one when they agree: configmaps data and binaryData;
// services the spec's type, clusterIP, publishNotReadyAddresses, selector and ports (name, port,
// protocol, targetPort; defaults filled in as the apiserver does); serviceaccounts
// automountServiceAccountToken; roles rules; rolebindings roleRef and subjects; networkpolicies
// spec. "" for any other type: secrets among them, whose data the operator never compares (it
// never rewrites a job's Secret, job_network.h) and so never holds in the cache.
std::string child_digest(const std::string& plural, const nlohmann::json& object);
// The most strays a store remembers (more are dropped: found again by the job's next create).
inline constexpr size_t kMaxStrays = 10000;

// Whether resourceVersion `a` is older than `b` (false when either is not an integer).
bool older_version(const std::string& a, const std::string& b);

// The objects of one resource type, by namespace and name.
class ObjectStore {
 public:
  // `admit` null: every object is kept. `track_strays`: remember strays (see the top).
  explicit ObjectStore(Transform transform, Admit admit = nullptr, bool track_strays = false);
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // A list's items (taken at `resource_version`) replace the contents; a stored object newer
  // than its listed copy, or newer than the list and missing from it (written through since),
  // is kept. Makes the store synced().
  void replace(const std::vector<nlohmann::json>& items, const std::string& resource_version);
  // One watch event: ADDED and MODIFIED store the object unless the stored copy is as new or
  // newer; DELETED removes it unless the stored copy is newer (a recreated object of the same
  // name), and remembers a possible stray; other types are ignored. An object not admitted is
  // removed.
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
  // Whether the stored namespace/name has metadata.uid == uid.
  bool has_uid(const std::string& namespace_, const std::string& name,
               const std::string& uid) const;
  // The strays of namespace_ whose owner has `owner_uid`, sorted by name.
  std::vector<std::string> strays(const std::string& namespace_,
                                  const std::string& owner_uid) const;
  void forget_stray(const std::string& namespace_, const std::string& name);

 private:
  using Key = std::pair<std::string, std::string>;  // namespace, name
  struct Entry {
    std::string version;               // metadata.resourceVersion
    std::string job;                   // the tlt.dev/job label; "" when none
    std::string uid;                   // metadata.uid
    bool deleting = false;             // metadata.deletionTimestamp is set
    std::vector<std::uint8_t> packed;  // the trimmed object as MessagePack
  };
  static Entry pack(const nlohmann::json& trimmed);
  static nlohmann::json unpack(const Entry& entry);
  // Stores `entry` under `key`, keeping the job index current.
  void put_locked(const Key& key, Entry entry);
  void erase_locked(const Key& key);

  // The trimmed copy of `object`, or nullopt when it is not admitted or has no metadata.
  std::optional<nlohmann::json> admitted(const nlohmann::json& object) const;

  const Transform transform_;
  const Admit admit_;
  const bool track_strays_;

  mutable std::mutex mu_;
  std::map<Key, Entry> objects_;                 // guarded by mu_
  std::map<Key, std::set<std::string>> by_job_;  // (namespace, job label) -> names; guarded by mu_
  bool synced_ = false;                          // guarded by mu_
  std::map<Key, std::string> strays_;            // -> owner uid; guarded by mu_
};

// The stores of every cached type, created up front (their set never changes).
class Cache {
 public:
  // `workloads`: also a store of Kueue's Workloads ("workloads", trim_workload), children of the
  // jobs like the owned types (the operator's --kueue).
  explicit Cache(bool workloads = false);
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // The store of `plural` (rljobs, tstpretrainjobs, pods, services, configmaps); nullptr for
  // any other.
  ObjectStore* store(const std::string& plural) const;
  // "" once every store has been filled by a list, else the plurals still waiting.
  std::string not_synced() const;
  // Whether every job store has been filled by a list.
  bool jobs_synced() const;
  // Whether `object`'s controller ownerReference names a job in the job stores, uid included.
  bool owned_by_known_job(const nlohmann::json& object) const;

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
