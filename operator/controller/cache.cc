// Object stores: trimmed copies by namespace/name and by job label; resourceVersion ordering.
#include "operator/controller/cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "api/fnv.h"
#include "operator/controller/desired.h"
#include "operator/controller/job.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

std::optional<unsigned long long> parse_version(const std::string& v) {
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::strtoull(v.c_str(), nullptr, 10);
}

// Whether `a` is as new as `b` or newer (false when either is not an integer).
bool at_least(const std::string& a, const std::string& b) {
  auto x = parse_version(a), y = parse_version(b);
  return x && y && *x >= *y;
}

std::string string_at(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

bool has_deletion(const Json& meta) {
  auto it = meta.find("deletionTimestamp");
  return it != meta.end() && !it->is_null();
}

// metadata without managedFields and kubectl's last-applied copy of the whole object.
Json trim_metadata(const Json& meta) {
  if (!meta.is_object()) return Json::object();
  Json out = meta;
  out.erase("managedFields");
  if (out.contains("annotations") && out["annotations"].is_object()) {
    out["annotations"].erase("kubectl.kubernetes.io/last-applied-configuration");
    if (out["annotations"].empty()) out.erase("annotations");
  }
  return out;
}

// The metadata a child keeps in a store: identity, version, deletion, the labels the operator
// sets and reads (tlt.dev/job, kind, role, index; managed-by), and the controller
// ownerReference.
Json trim_child_metadata(const Json& meta) {
  Json m = Json::object();
  if (!meta.is_object()) return m;
  for (const char* k : {"name", "namespace", "uid", "resourceVersion", "deletionTimestamp"}) {
    if (meta.contains(k)) m[k] = meta[k];
  }
  Json labels = Json::object();
  const Json all_labels = meta.value("labels", Json::object());
  if (all_labels.is_object()) {
    for (const char* k : {kJobLabel, kKindLabel, kRoleLabel, kIndexLabel, kManagedByLabel}) {
      if (all_labels.contains(k)) labels[k] = all_labels[k];
    }
  }
  m["labels"] = labels;
  Json owners = Json::array();
  const Json refs = meta.value("ownerReferences", Json::array());
  for (const Json& ref : refs.is_array() ? refs : Json::array()) {
    if (!ref.is_object() || ref.value("controller", Json(false)) != Json(true)) continue;
    Json r = Json::object();
    for (const char* k : {"apiVersion", "kind", "name", "uid", "controller"}) {
      if (ref.contains(k)) r[k] = ref[k];
    }
    owners.push_back(r);
  }
  if (!owners.empty()) m["ownerReferences"] = owners;
  return m;
}

// What the reconciler compares of a Service's spec, with the apiserver's defaults filled in
// (type ClusterIP, protocol TCP, targetPort = port), so that a desired spec and its stored copy
// agree.
Json service_compared(const Json& spec) {
  if (!spec.is_object()) return Json();
  Json ports = Json::array();
  const Json all_ports = spec.value("ports", Json::array());
  for (const Json& p : all_ports.is_array() ? all_ports : Json::array()) {
    if (!p.is_object()) {
      ports.push_back(p);
      continue;
    }
    Json port = p.value("port", Json());
    ports.push_back({{"name", p.value("name", Json(""))},
                     {"port", port},
                     {"protocol", p.value("protocol", Json("TCP"))},
                     {"targetPort", p.value("targetPort", port)}});
  }
  return {{"type", spec.value("type", Json("ClusterIP"))},
          {"clusterIP", spec.value("clusterIP", Json())},
          {"publishNotReadyAddresses", spec.value("publishNotReadyAddresses", Json(false))},
          {"selector", spec.value("selector", Json::object())},
          {"ports", ports}};
}

}  // namespace

bool older_version(const std::string& a, const std::string& b) {
  auto x = parse_version(a), y = parse_version(b);
  return x && y && *x < *y;
}

Json trim_object(const Json& object) {
  Json out = object;
  if (out.is_object() && out.contains("metadata")) out["metadata"] = trim_metadata(out["metadata"]);
  return out;
}

Json trim_pod(const Json& pod) {
  Json m = trim_child_metadata(pod.value("metadata", Json::object()));
  const Json meta = pod.value("metadata", Json::object());
  const Json labels = meta.is_object() ? meta.value("labels", Json::object()) : Json();
  if (labels.is_object() && labels.contains(kTrainerWorldLabel))
    m["labels"][kTrainerWorldLabel] = labels[kTrainerWorldLabel];
  const Json annotations = meta.is_object() ? meta.value("annotations", Json::object()) : Json();
  if (annotations.is_object()) {
    for (const char* k : {kProgressAnnotation, api::kAssignmentAnnotation}) {
      if (annotations.contains(k)) m["annotations"][k] = annotations[k];
    }
  }
  if (meta.is_object() && meta.contains("creationTimestamp"))
    m["creationTimestamp"] = meta["creationTimestamp"];
  Json out = {{"metadata", m}};
  const Json status = pod.value("status", Json::object());
  if (status.is_object()) {
    Json s = Json::object();
    if (status.contains("phase")) s["phase"] = status["phase"];
    Json conditions = Json::array();
    for (const Json& c : status.value("conditions", Json::array())) {
      if (!c.is_object()) continue;
      const std::string type = c.value("type", "");
      if (type == "Ready")
        conditions.push_back({{"type", "Ready"}, {"status", c.value("status", "")}});
      if (type == "PodScheduled" && c.value("status", "") == "False") {
        conditions.push_back({{"type", type},
                              {"status", "False"},
                              {"reason", c.value("reason", "")},
                              {"message", c.value("message", "").substr(0, 300)}});
      }
    }
    if (!conditions.empty()) s["conditions"] = conditions;
    out["status"] = s;
  }
  return out;
}

Json trim_child(const std::string& plural, const Json& object) {
  if (!object.is_object()) return Json::object();
  return {{"metadata", trim_child_metadata(object.value("metadata", Json::object()))},
          {"digest", child_digest(plural, object)}};
}

Json trim_workload(const Json& object) {
  if (!object.is_object()) return Json::object();
  Json out = {{"metadata", trim_child_metadata(object.value("metadata", Json::object()))}};
  const Json spec = object.value("spec", Json::object());
  if (spec.is_object()) {
    for (const char* k : {"queueName", "podSets"}) {
      if (spec.contains(k)) out["spec"][k] = spec[k];
    }
  }
  const Json status = object.value("status", Json::object());
  if (status.is_object()) {
    for (const char* k : {"conditions", "admission"}) {
      if (status.contains(k)) out["status"][k] = status[k];
    }
  }
  return out;
}

std::string child_digest(const std::string& plural, const Json& object) {
  Json compared = Json::object();
  auto take = [&](const char* k) {
    auto it = object.is_object() ? object.find(k) : object.end();
    compared[k] = it == object.end() ? Json() : *it;
  };
  if (plural == "configmaps") {
    take("data");
    take("binaryData");
  } else if (plural == "services") {
    compared = service_compared(object.is_object() ? object.value("spec", Json::object()) : Json());
  } else if (plural == "serviceaccounts") {
    take("automountServiceAccountToken");
  } else if (plural == "roles") {
    take("rules");
  } else if (plural == "rolebindings") {
    take("roleRef");
    take("subjects");
  } else if (plural == "networkpolicies") {
    take("spec");
  } else {
    return "";
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv1a64(compared.dump())));
  return hex;
}

ObjectStore::ObjectStore(Transform transform, Admit admit, bool track_strays)
    : transform_(std::move(transform)), admit_(std::move(admit)), track_strays_(track_strays) {}

std::optional<Json> ObjectStore::admitted(const Json& object) const {
  if (admit_ && !admit_(object)) return std::nullopt;
  Json t = transform_(object);
  if (!t.is_object() || !t.contains("metadata") || !t["metadata"].is_object()) return std::nullopt;
  return t;
}

ObjectStore::Entry ObjectStore::pack(const Json& trimmed) {
  Entry e;
  static const Json kNone = Json::object();
  const Json& meta = trimmed.contains("metadata") ? trimmed["metadata"] : kNone;
  e.version = string_at(meta, "resourceVersion");
  e.uid = string_at(meta, "uid");
  e.deleting = has_deletion(meta);
  if (meta.contains("labels") && meta["labels"].is_object())
    e.job = string_at(meta["labels"], kJobLabel);
  e.packed = Json::to_msgpack(trimmed);
  return e;
}

Json ObjectStore::unpack(const Entry& entry) {
  return Json::from_msgpack(entry.packed);
}

void ObjectStore::put_locked(const Key& key, Entry entry) {
  erase_locked(key);
  if (!entry.job.empty()) by_job_[{key.first, entry.job}].insert(key.second);
  objects_[key] = std::move(entry);
}

void ObjectStore::erase_locked(const Key& key) {
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  auto idx = by_job_.find({key.first, it->second.job});
  if (idx != by_job_.end()) {
    idx->second.erase(key.second);
    if (idx->second.empty()) by_job_.erase(idx);
  }
  objects_.erase(it);
}

void ObjectStore::replace(const std::vector<Json>& items, const std::string& resource_version) {
  std::map<Key, Entry> listed;
  for (const Json& item : items) {
    std::optional<Json> t = admitted(item);
    if (!t) continue;
    const Json& meta = (*t)["metadata"];
    listed[{string_at(meta, "namespace"), string_at(meta, "name")}] = pack(*t);
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Key> stale;
  for (const auto& [key, stored] : objects_) {
    auto it = listed.find(key);
    bool keep = it == listed.end() ? older_version(resource_version, stored.version)
                                   : at_least(stored.version, it->second.version);
    if (keep) {
      if (it != listed.end()) listed.erase(it);
    } else if (it == listed.end()) {
      stale.push_back(key);
    }
  }
  for (const Key& key : stale) erase_locked(key);
  for (auto& [key, entry] : listed) {
    strays_.erase(key);
    put_locked(key, std::move(entry));
  }
  synced_ = true;
}

void ObjectStore::apply(const kube::WatchEvent& event) {
  if (event.type != "ADDED" && event.type != "MODIFIED" && event.type != "DELETED") return;
  auto meta = event.object.is_object() ? event.object.find("metadata") : event.object.end();
  if (meta == event.object.end() || !meta->is_object()) return;
  Key key{string_at(*meta, "namespace"), string_at(*meta, "name")};
  if (event.type != "DELETED") {
    if (admitted(event.object)) return written(event.object);
    std::lock_guard<std::mutex> lock(mu_);
    erase_locked(key);  // no longer a child of a live job
    return;
  }
  std::string incoming = string_at(*meta, "resourceVersion");
  // Gone without being marked as being deleted: perhaps only out of the selection (see the top).
  bool stray = track_strays_ && !has_deletion(*meta) && (!admit_ || admit_(event.object));
  std::string owner;
  if (stray) {
    for (const Json& ref : meta->value("ownerReferences", Json::array())) {
      if (ref.is_object() && ref.value("controller", Json(false)) == Json(true))
        owner = string_at(ref, "uid");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it != objects_.end() && older_version(incoming, it->second.version))
    return;  // the stored object is newer: recreated under the same name
  if (it != objects_.end() && it->second.deleting) owner.clear();  // its deletion was seen
  erase_locked(key);
  if (!owner.empty() && (strays_.size() < kMaxStrays || strays_.count(key))) strays_[key] = owner;
}

void ObjectStore::written(const Json& object) {
  std::optional<Json> t = admitted(object);
  if (!t) return;
  const Json& meta = (*t)["metadata"];
  Key key{string_at(meta, "namespace"), string_at(meta, "name")};
  Entry entry = pack(*t);
  std::lock_guard<std::mutex> lock(mu_);
  strays_.erase(key);
  auto it = objects_.find(key);
  if (it != objects_.end() && at_least(it->second.version, entry.version)) return;
  put_locked(key, std::move(entry));
}

void ObjectStore::deleted(const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find({ns, name});
  if (it == objects_.end()) return;
  Json object = unpack(it->second);
  Json& meta = object["metadata"];
  if (meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null()) return;
  meta["deletionTimestamp"] = "1970-01-01T00:00:00Z";  // "being deleted"; the time is unknown
  it->second.packed = Json::to_msgpack(object);
  it->second.deleting = true;
}

std::optional<Json> ObjectStore::get(const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find({ns, name});
  if (it == objects_.end()) return std::nullopt;
  return unpack(it->second);
}

std::vector<Json> ObjectStore::by_job(const std::string& ns, const std::string& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Json> out;
  auto idx = by_job_.find({ns, job});
  if (idx == by_job_.end()) return out;
  for (const std::string& name : idx->second) out.push_back(unpack(objects_.at({ns, name})));
  return out;
}

std::vector<Json> ObjectStore::list(const std::string& ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Json> out;
  for (const auto& [key, entry] : objects_) {
    if (ns.empty() || key.first == ns) out.push_back(unpack(entry));
  }
  return out;
}

size_t ObjectStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.size();
}

bool ObjectStore::synced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool ObjectStore::has_uid(const std::string& ns, const std::string& name,
                          const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find({ns, name});
  return it != objects_.end() && !uid.empty() && it->second.uid == uid;
}

std::vector<std::string> ObjectStore::strays(const std::string& ns,
                                             const std::string& owner_uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (auto it = strays_.lower_bound({ns, ""}); it != strays_.end() && it->first.first == ns;
       ++it) {
    if (it->second == owner_uid) out.push_back(it->first.second);
  }
  return out;
}

void ObjectStore::forget_stray(const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  strays_.erase({ns, name});
}

Cache::Cache(bool workloads) {
  for (const std::string& kind : job_kinds())
    stores_[job_resource(kind, "").plural] = std::make_unique<ObjectStore>(trim_object);
  Admit admit = [this](const Json& o) { return owned_by_known_job(o); };
  stores_["pods"] = std::make_unique<ObjectStore>(trim_pod, admit, true);
  for (const kube::Resource& r : owned_resources("")) {
    if (r.plural == "pods") continue;
    stores_[r.plural] = std::make_unique<ObjectStore>(
        [plural = r.plural](const Json& o) { return trim_child(plural, o); }, admit, true);
  }
  if (workloads) stores_["workloads"] = std::make_unique<ObjectStore>(trim_workload, admit);
}

bool Cache::jobs_synced() const {
  for (const std::string& kind : job_kinds()) {
    if (!store(job_resource(kind, "").plural)->synced()) return false;
  }
  return true;
}

bool Cache::owned_by_known_job(const Json& object) const {
  auto meta = object.is_object() ? object.find("metadata") : object.end();
  if (meta == object.end() || !meta->is_object()) return false;
  const std::string ns = string_at(*meta, "namespace");
  auto refs = meta->find("ownerReferences");
  if (refs == meta->end() || !refs->is_array()) return false;
  for (const Json& ref : *refs) {
    if (!ref.is_object() || ref.value("controller", Json(false)) != Json(true)) continue;
    const std::string kind = string_at(ref, "kind");
    const auto& kinds = job_kinds();
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) return false;
    return store(job_resource(kind, "").plural)
        ->has_uid(ns, string_at(ref, "name"), string_at(ref, "uid"));
  }
  return false;
}

ObjectStore* Cache::store(const std::string& plural) const {
  auto it = stores_.find(plural);
  return it == stores_.end() ? nullptr : it->second.get();
}

std::string Cache::not_synced() const {
  std::string out;
  for (const auto& [plural, store] : stores_) {
    if (!store->synced()) out += (out.empty() ? "" : ", ") + plural;
  }
  return out;
}

std::optional<Json> Cache::get(const kube::Resource& r, const std::string& name) const {
  ObjectStore* s = store(r.plural);
  return s ? s->get(r.namespace_, name) : std::nullopt;
}

std::vector<Json> Cache::by_job(const kube::Resource& r, const std::string& job) const {
  ObjectStore* s = store(r.plural);
  return s ? s->by_job(r.namespace_, job) : std::vector<Json>{};
}

std::vector<Json> Cache::list(const kube::Resource& r) const {
  ObjectStore* s = store(r.plural);
  return s ? s->list(r.namespace_) : std::vector<Json>{};
}

void Cache::written(const kube::Resource& r, const Json& object) const {
  if (ObjectStore* s = store(r.plural)) s->written(object);
}

void Cache::deleted(const kube::Resource& r, const std::string& name) const {
  if (ObjectStore* s = store(r.plural)) s->deleted(r.namespace_, name);
}

}  // namespace tlt::controller
