// FakeKubeClient: the apiserver's bookkeeping that reconcilers rely on, in memory.
#include "kube/fake_client.h"

#include <sstream>
#include <utility>

namespace tlt::kube {
namespace {

using Json = nlohmann::json;

std::string name_of(const Json& o) {
  return o["metadata"].value("name", "");
}

std::string join(const Resource& r, const std::string& name) {
  return r.plural + "/" + r.namespace_ + "/" + name;
}

}  // namespace

bool labels_match(const Json& object, const std::string& selector) {
  const Json* labels = nullptr;
  if (object.contains("metadata") && object["metadata"].contains("labels"))
    labels = &object["metadata"]["labels"];
  auto value = [&](const std::string& k, std::string* v) {
    if (!labels || !labels->contains(k)) return false;
    *v = (*labels)[k].get<std::string>();
    return true;
  };
  std::stringstream terms(selector);
  std::string term;
  while (std::getline(terms, term, ',')) {
    if (term.empty()) continue;
    std::string v;
    size_t ne = term.find("!="), eq = term.find('=');
    if (ne != std::string::npos) {
      if (value(term.substr(0, ne), &v) && v == term.substr(ne + 2)) return false;
    } else if (eq != std::string::npos) {
      if (!value(term.substr(0, eq), &v) || v != term.substr(eq + 1)) return false;
    } else if (!value(term, &v)) {
      return false;
    }
  }
  return true;
}

Status FakeKubeClient::enter(const std::string& verb, const Resource& r) {
  ++calls_[verb + " " + r.plural];
  auto it = failures_.find(verb);
  if (it == failures_.end()) return Status::Ok();
  Status s = it->second;
  failures_.erase(it);
  return s;
}

Json& FakeKubeClient::store(const Resource& r, Json object) {
  Json& meta = object["metadata"];
  meta["namespace"] = r.namespace_;
  meta["resourceVersion"] = std::to_string(++resource_version_);
  if (!meta.contains("uid")) meta["uid"] = "uid-" + std::to_string(++uid_);
  Key key{type_of(r), r.namespace_, name_of(object)};
  auto it = objects_.find(key);
  int64_t generation = 1;
  if (it != objects_.end()) {
    generation = it->second["metadata"].value("generation", int64_t{1});
    if (it->second.value("spec", Json()) != object.value("spec", Json())) ++generation;
  }
  meta["generation"] = generation;
  Json& slot = objects_[key];
  slot = std::move(object);
  return slot;
}

StatusOr<Json> FakeKubeClient::get(const Resource& r, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  TLT_RETURN_IF_ERROR(enter("get", r));
  auto it = objects_.find({type_of(r), r.namespace_, name});
  if (it == objects_.end()) return Status::NotFound("get " + r.plural + "/" + name + ": not found");
  return it->second;
}

StatusOr<ObjectList> FakeKubeClient::list(const Resource& r, const ListOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  TLT_RETURN_IF_ERROR(enter("list", r));
  ObjectList out;
  for (const auto& [key, object] : objects_) {
    if (std::get<0>(key) != type_of(r)) continue;
    if (!r.namespace_.empty() && std::get<1>(key) != r.namespace_) continue;
    if (!labels_match(object, options.label_selector)) continue;
    out.items.push_back(object);
  }
  out.resource_version = std::to_string(resource_version_);
  return out;
}

StatusOr<Json> FakeKubeClient::create(const Resource& r, const Json& object) {
  std::lock_guard<std::mutex> lock(mu_);
  TLT_RETURN_IF_ERROR(enter("create", r));
  std::string name = object.contains("metadata") ? name_of(object) : "";
  if (name.empty()) return Status::InvalidArgument("create " + r.plural + ": metadata.name");
  if (objects_.count({type_of(r), r.namespace_, name}))
    return Status::AlreadyExists("create " + r.plural + "/" + name + ": already exists");
  return store(r, object);
}

StatusOr<Json> FakeKubeClient::apply(const Resource& r, const Json& object,
                                     const std::string& field_manager) {
  std::lock_guard<std::mutex> lock(mu_);
  TLT_RETURN_IF_ERROR(enter("apply", r));
  std::string name = object.contains("metadata") ? name_of(object) : "";
  if (name.empty()) return Status::InvalidArgument("apply " + r.plural + ": metadata.name");
  appliers_[join(r, name)] = field_manager;
  auto it = objects_.find({type_of(r), r.namespace_, name});
  if (it == objects_.end()) return store(r, object);
  Json merged = it->second;
  merged.merge_patch(object);
  return store(r, std::move(merged));
}

StatusOr<Json> FakeKubeClient::patch_status(const Resource& r, const std::string& name,
                                            const Json& status,
                                            const std::string& resource_version) {
  std::lock_guard<std::mutex> lock(mu_);
  TLT_RETURN_IF_ERROR(enter("patch_status", r));
  auto it = objects_.find({type_of(r), r.namespace_, name});
  if (it == objects_.end()) return Status::NotFound("patch status of " + r.plural + "/" + name);
  if (!resource_version.empty() && it->second["metadata"]["resourceVersion"] != resource_version)
    return Status::Aborted("patch status of " + r.plural + "/" + name +
                           ": the object has been modified");
  Json merged = it->second;
  merged.merge_patch(Json{{"status", status}});
  return store(r, std::move(merged));
}

StatusOr<Json> FakeKubeClient::patch(const Resource& r, const std::string& name,
                                     const Json& patch) {
  std::lock_guard<std::mutex> lock(mu_);
  TLT_RETURN_IF_ERROR(enter("patch", r));
  Key key{type_of(r), r.namespace_, name};
  auto it = objects_.find(key);
  if (it == objects_.end()) return Status::NotFound("patch " + r.plural + "/" + name);
  Json p = patch;
  if (p.contains("metadata") && p["metadata"].contains("resourceVersion")) {
    if (p["metadata"]["resourceVersion"] != it->second["metadata"]["resourceVersion"])
      return Status::Aborted("patch " + r.plural + "/" + name + ": the object has been modified");
    p["metadata"].erase("resourceVersion");
  }
  Json merged = it->second;
  merged.merge_patch(p);
  const Json& meta = merged["metadata"];
  bool finalized = meta.contains("deletionTimestamp") &&
                   (!meta.contains("finalizers") || meta["finalizers"].empty());
  if (finalized) {
    objects_.erase(it);
    return merged;
  }
  return store(r, std::move(merged));
}

Status FakeKubeClient::remove(const Resource& r, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  TLT_RETURN_IF_ERROR(enter("remove", r));
  auto it = objects_.find({type_of(r), r.namespace_, name});
  if (it == objects_.end()) return Status::NotFound("delete " + r.plural + "/" + name);
  Json& meta = it->second["metadata"];
  if (meta.contains("finalizers") && !meta["finalizers"].empty()) {
    if (!meta.contains("deletionTimestamp")) {
      Json o = it->second;
      o["metadata"]["deletionTimestamp"] = "2000-01-01T00:00:00Z";
      store(r, std::move(o));
    }
    return Status::Ok();
  }
  objects_.erase(it);
  return Status::Ok();
}

Status FakeKubeClient::watch(const Resource& r, const WatchOptions&,
                             const std::function<bool(const WatchEvent&)>&) {
  return Status::Unimplemented("FakeKubeClient cannot watch " + r.plural);
}

int FakeKubeClient::calls(const std::string& verb, const std::string& plural) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [k, v] : calls_) {
    if (plural.empty() ? k.rfind(verb + " ", 0) == 0 : k == verb + " " + plural) n += v;
  }
  return n;
}

void FakeKubeClient::reset_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.clear();
}

void FakeKubeClient::fail_next(const std::string& verb, Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_[verb] = std::move(status);
}

void FakeKubeClient::put(const Resource& r, const Json& object) {
  std::lock_guard<std::mutex> lock(mu_);
  store(r, object);
}

std::vector<Json> FakeKubeClient::objects(const Resource& r) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Json> out;
  for (const auto& [key, object] : objects_) {
    if (std::get<0>(key) != type_of(r)) continue;
    if (!r.namespace_.empty() && std::get<1>(key) != r.namespace_) continue;
    out.push_back(object);
  }
  return out;
}

std::map<std::string, std::string> FakeKubeClient::appliers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return appliers_;
}

}  // namespace tlt::kube
