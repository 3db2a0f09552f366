// The job's Secret, its pods' credentials and its NetworkPolicy (job_network.h).
#include "operator/controller/job_network.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

#include "api/spec.h"
#include "operator/controller/desired.h"
#include "runtime/cluster/job_secret.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

constexpr int kSecretFileMode = 0444;  // read-only, for the container's user whatever its uid

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A label name or value: at most 63 characters, alphanumerics, '-', '_' and '.', beginning and
// ending with an alphanumeric.
bool label_word(const std::string& s) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A label key: [DNS subdomain "/"] name.
bool label_key(const std::string& key) {
  size_t slash = key.find('/');
  if (slash == std::string::npos) return label_word(key);
  const std::string prefix = key.substr(0, slash);
  bool dns = !prefix.empty() && prefix.size() <= 253 &&
             std::all_of(prefix.begin(), prefix.end(), [](char c) {
               return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
             });
  return dns && label_word(key.substr(slash + 1));
}

std::string base64(const std::string& text) {
  std::string out(4 * ((text.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

// object[key] when it is of `type`, else nullptr.
const Json* typed(const Json& object, const char* key, Json::value_t type) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it != object.end() && it->type() == type ? &*it : nullptr;
}

std::string string_at(const Json& object, const char* key) {
  const Json* v = typed(object, key, Json::value_t::string);
  return v ? v->get<std::string>() : "";
}

// Replaces the entry of `list` whose name equals item's, or appends.
void upsert_named(Json* list, const Json& item) {
  if (!list->is_array()) *list = Json::array();
  for (Json& e : *list) {
    if (e.is_object() && string_at(e, "name") == item["name"].get<std::string>()) {
      e = item;
      return;
    }
  }
  list->push_back(item);
}

// spec.metrics.port of the job's document (0 when absent).
int64_t metrics_port(const JobView& job) {
  const Json* spec = typed(job.document, "spec", Json::value_t::object);
  const Json* metrics = spec ? typed(*spec, "metrics", Json::value_t::object) : nullptr;
  auto port = metrics ? metrics->find("port") : job.document.end();
  return metrics && port != metrics->end() && port->is_number_integer() ? port->get<int64_t>() : 0;
}

Json token_volume() {
  Json token = {
      {"serviceAccountToken", {{"path", "token"}, {"expirationSeconds", kTokenExpirationSeconds}}}};
  Json ca = {
      {"configMap",
       {{"name", "kube-root-ca.crt"}, {"items", {{{"key", "ca.crt"}, {"path", "ca.crt"}}}}}}};
  Json ns = {{"downwardAPI",
              {{"items",
                {{{"path", "namespace"},
                  {"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "metadata.namespace"}}}}}}}}};
  return {{"name", kTokenVolume},
          {"projected", {{"defaultMode", kSecretFileMode}, {"sources", {token, ca, ns}}}}};
}

// The volumeMounts of container `c` (at `at`) that reach for the tlt container's credentials.
void check_mounts(const Json& c, const std::string& at, std::vector<std::string>* out) {
  const Json* mounts = typed(c, "volumeMounts", Json::value_t::array);
  if (!mounts) return;
  for (size_t j = 0; j < mounts->size(); ++j) {
    const std::string name = string_at((*mounts)[j], "name");
    if (name != kJobSecretVolume && name != kTokenVolume) continue;
    out->push_back(at + ".volumeMounts[" + std::to_string(j) + "].name: \"" + name +
                   "\" is the operator's volume of the job's " +
                   (name == kTokenVolume ? "apiserver token" : "secret") +
                   ", mounted into the \"tlt\" container only; remove this mount");
  }
}

void refuse_secret(const std::string& field, const std::string& name,
                   std::vector<std::string>* out) {
  out->push_back(field + ": \"" + name +
                 "\" names a job secret (Secret names ending in -rl-secret or -tst-secret are "
                 "reserved for the operator's job secrets, mounted into the \"tlt\" container "
                 "only); name another Secret");
}

// env[].valueFrom.secretKeyRef.name and envFrom[].secretRef.name of container `c` (at `at`).
void check_env(const Json& c, const std::string& at, std::vector<std::string>* out) {
  if (const Json* env = typed(c, "env", Json::value_t::array)) {
    for (size_t j = 0; j < env->size(); ++j) {
      const Json* from = typed((*env)[j], "valueFrom", Json::value_t::object);
      const Json* ref = from ? typed(*from, "secretKeyRef", Json::value_t::object) : nullptr;
      if (ref && is_job_secret_name(string_at(*ref, "name")))
        refuse_secret(at + ".env[" + std::to_string(j) + "].valueFrom.secretKeyRef.name",
                      string_at(*ref, "name"), out);
    }
  }
  if (const Json* env_from = typed(c, "envFrom", Json::value_t::array)) {
    for (size_t j = 0; j < env_from->size(); ++j) {
      const Json* ref = typed((*env_from)[j], "secretRef", Json::value_t::object);
      if (ref && is_job_secret_name(string_at(*ref, "name")))
        refuse_secret(at + ".envFrom[" + std::to_string(j) + "].secretRef.name",
                      string_at(*ref, "name"), out);
    }
  }
}

// volumes[].secret.secretName and volumes[].projected.sources[].secret.name.
void check_volumes(const Json& spec, const std::string& at, std::vector<std::string>* out) {
  const Json* volumes = typed(spec, "volumes", Json::value_t::array);
  if (!volumes) return;
  for (size_t i = 0; i < volumes->size(); ++i) {
    const std::string v = at + ".volumes[" + std::to_string(i) + "]";
    const Json* secret = typed((*volumes)[i], "secret", Json::value_t::object);
    if (secret && is_job_secret_name(string_at(*secret, "secretName")))
      refuse_secret(v + ".secret.secretName", string_at(*secret, "secretName"), out);
    const Json* projected = typed((*volumes)[i], "projected", Json::value_t::object);
    const Json* sources = projected ? typed(*projected, "sources", Json::value_t::array) : nullptr;
    for (size_t k = 0; sources && k < sources->size(); ++k) {
      const Json* s = typed((*sources)[k], "secret", Json::value_t::object);
      if (s && is_job_secret_name(string_at(*s, "name")))
        refuse_secret(v + ".projected.sources[" + std::to_string(k) + "].secret.name",
                      string_at(*s, "name"), out);
    }
  }
}

}  // namespace

Status NetworkPolicyOptions::add_metrics_from(const std::string& term) {
  const size_t eq = term.find('=');
  const std::string key = term.substr(0, eq);
  const std::string value = eq == std::string::npos ? "" : term.substr(eq + 1);
  if (eq == std::string::npos || !label_key(key) || (!value.empty() && !label_word(value))) {
    return Status::InvalidArgument(
        "--network-policy-metrics-from=" + term +
        ": must be a namespace label KEY=VALUE (a Kubernetes label key and value), e.g. "
        "kubernetes.io/metadata.name=monitoring");
  }
  if (metrics_from.count(key)) {
    return Status::InvalidArgument("--network-policy-metrics-from=" + term + ": the key " + key +
                                   " is given twice; a namespace has one value per label key");
  }
  metrics_from[key] = value;
  return Status::Ok();
}

std::string job_secret_name(const std::string& kind, const std::string& job) {
  return service_name(kind, job) + "-secret";
}

bool is_job_secret_name(const std::string& name) {
  return ends_with(name, "-rl-secret") || ends_with(name, "-tst-secret");
}

std::string network_policy_name(const std::string& kind, const std::string& job) {
  return service_name(kind, job);
}

Json desired_job_secret(const JobView& job, const std::string& secret_hex) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", child_object_meta(job, job_secret_name(job.meta.kind, job.meta.name))},
          {"type", "Opaque"},
          {"immutable", true},
          {"data", {{kJobSecretKey, base64(secret_hex)}}}};
}

Json desired_network_policy(const JobView& job, const NetworkPolicyOptions& options) {
  Json job_pods = {{"podSelector", {{"matchLabels", job_selector_labels(job)}}}};
  Json ingress = Json::array({{{"from", Json::array({job_pods})}}});
  if (int64_t port = metrics_port(job); port > 0) {
    Json namespaces = Json::object();
    if (!options.metrics_from.empty()) namespaces["matchLabels"] = options.metrics_from;
    ingress.push_back({{"from", {{{"namespaceSelector", namespaces}}}},
                       {"ports", {{{"protocol", "TCP"}, {"port", port}}}}});
  }
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", child_object_meta(job, network_policy_name(job.meta.kind, job.meta.name))},
          {"spec",
           {{"podSelector", {{"matchLabels", job_selector_labels(job)}}},
            {"policyTypes", {"Ingress"}},
            {"ingress", ingress}}}};
}

void add_job_credentials(const JobView& job, bool uses_apiserver, Json* pod_spec) {
  Json& spec = *pod_spec;
  const bool own_token = !spec.contains("automountServiceAccountToken") ||
                         spec["automountServiceAccountToken"].is_null();
  if (own_token) spec["automountServiceAccountToken"] = false;
  const bool token = own_token && uses_apiserver;
  upsert_named(&spec["volumes"], {{"name", kJobSecretVolume},
                                  {"secret",
                                   {{"secretName", job_secret_name(job.meta.kind, job.meta.name)},
                                    {"defaultMode", kSecretFileMode}}}});
  if (token) upsert_named(&spec["volumes"], token_volume());
  if (!spec["containers"].is_array()) return;
  for (Json& c : spec["containers"]) {
    if (string_at(c, "name") != kContainerName) continue;
    upsert_named(
        &c["volumeMounts"],
        {{"name", kJobSecretVolume}, {"mountPath", cluster::kSecretMountDir}, {"readOnly", true}});
    if (token)
      upsert_named(&c["volumeMounts"],
                   {{"name", kTokenVolume}, {"mountPath", kTokenMountDir}, {"readOnly", true}});
    upsert_named(&c["env"],
                 {{"name", cluster::kSecretFileEnv},
                  {"value", std::string(cluster::kSecretMountDir) + "/" + kJobSecretKey}});
  }
}

std::vector<std::string> check_job_credentials(const Json& pod_template, const std::string& path) {
  std::vector<std::string> out;
  const Json* spec = typed(pod_template, "spec", Json::value_t::object);
  if (!spec) return out;
  const std::string at = path + ".spec";
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    const Json* containers = typed(*spec, list, Json::value_t::array);
    for (size_t i = 0; containers && i < containers->size(); ++i) {
      const Json& c = (*containers)[i];
      const std::string where = at + "." + list + "[" + std::to_string(i) + "]";
      if (std::string(list) != "containers" || string_at(c, "name") != kContainerName)
        check_mounts(c, where, &out);
      check_env(c, where, &out);
    }
  }
  check_volumes(*spec, at, &out);
  const Json* shared = typed(*spec, "shareProcessNamespace", Json::value_t::boolean);
  if (shared && shared->get<bool>()) {
    out.push_back(at +
                  ".shareProcessNamespace: true would let every container of the pod read the "
                  "\"tlt\" container's files through /proc, the job's secret and apiserver "
                  "token among them; leave it out");
  }
  return out;
}

}  // namespace tlt::controller
