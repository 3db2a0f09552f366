// What the reconcilers read from a job object: the kind-independent view of an RLJob or a
// TSTPretrainJob (its roles, replicas, resources, pod templates, suspend, failure policy), and
// the identity and bookkeeping read straight from the apiserver's JSON (which is readable even
// when the spec is not valid).
//
// Thread safety: plain values and stateless functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/labels.h"
#include "api/status.h"
#include "kube/client.h"

namespace tlt::controller {

// Labels every owned object carries, and a runtime pod's progress report (progress.h): the
// contract with the runtime, in api/labels.h.
using api::kIndexLabel;
using api::kJobLabel;
using api::kProgressAnnotation;
using api::kRoleLabel;
inline constexpr const char* kKindLabel = "tlt.dev/kind";  // RLJob or TSTPretrainJob
// On an RLJob's trainer pods: the trainer group's world size the pod was made with
// (TLT_TRAINER_WORLD), which the running group keeps (trainer_world.h).
inline constexpr const char* kTrainerWorldLabel = "tlt.dev/trainer-world";
inline constexpr const char* kFinalizer = "tlt.dev/cleanup";
inline constexpr const char* kFieldManager = "tlt-operator";
inline constexpr const char* kContainerName = "tlt";

// The two job kinds: "RLJob" and "TSTPretrainJob".
const std::vector<std::string>& job_kinds();
// The job resource of `kind` in `namespace_` ("" for all namespaces); plural rljobs or
// tstpretrainjobs.
kube::Resource job_resource(const std::string& kind, const std::string& namespace_);
kube::Resource pod_resource(const std::string& namespace_);
kube::Resource service_resource(const std::string& namespace_);
kube::Resource configmap_resource(const std::string& namespace_);
kube::Resource event_resource(const std::string& namespace_);
// The job's own identity (desired.h): its ServiceAccount, Role and RoleBinding.
kube::Resource serviceaccount_resource(const std::string& namespace_);
kube::Resource role_resource(const std::string& namespace_);
kube::Resource rolebinding_resource(const std::string& namespace_);
// The job's network surface (job_network.h): its Secret and its NetworkPolicy.
kube::Resource secret_resource(const std::string& namespace_);
kube::Resource networkpolicy_resource(const std::string& namespace_);
// Every type of object a job owns (each labelled tlt.dev/job), in `namespace_` ("" for all):
// pods, services, configmaps, serviceaccounts, roles, rolebindings, secrets, networkpolicies.
// The informers watch these and the cache keeps them.
std::vector<kube::Resource> owned_resources(const std::string& namespace_);

// Identity and bookkeeping of a job object, read without decoding its spec.
struct ObservedJob {
  std::string kind;  // "RLJob"
  std::string namespace_, name, uid, resource_version;
  int64_t generation = 0;
  bool deleting = false;  // metadata.deletionTimestamp is set
  std::vector<std::string> finalizers;
  nlohmann::json status = nlohmann::json::object();  // as stored; {} when none
};
ObservedJob observe_job(const std::string& kind, const nlohmann::json& object);

// A core/v1 Event about `job` reported by `component` at `now` (RFC 3339), named
// <job>.<suffix> with a suffix unique in this process. Thread-safe.
nlohmann::json event_object(const ObservedJob& job, const std::string& type,
                            const std::string& reason, const std::string& message,
                            const std::string& component, const std::string& now);

// One role: pods named <job>-<role>-<i> for i in [0, replicas).
struct RoleView {
  std::string name;  // rollout, trainer, drafter; workers
  int32_t replicas = 0;
  nlohmann::json resources = nlohmann::json::object();     // {requests: {...}, limits: {...}}
  nlohmann::json pod_template = nlohmann::json::object();  // the user's PodTemplateSpec
  std::string path;  // where the role is in the job: "spec.roles.rollout", "spec.workers"
};

// The decoded, valid spec of a job, as far as pods are concerned.
struct JobView {
  ObservedJob meta;
  std::map<std::string, std::string> labels;  // the job's own labels, copied onto its pods
  std::vector<RoleView> roles;                // in a fixed order
  std::string completion_role;  // whose pods all succeeding ends the job: trainer; workers
  bool suspend = false;
  int32_t backoff_limit = 3;
  std::optional<int64_t> ttl_seconds_after_finished;
  nlohmann::json document;  // apiVersion, kind, metadata {name, namespace, labels}, spec: the
                            // ConfigMap's job.json, which the runtime decodes
};

// Decodes and validates `object` (api/manifest.h parse_job_json). InvalidArgument listing
// every problem, one per line ("spec.roles.rollout.replicas: must be >= 1 (got 0)"), when the
// spec is not one tlt can run.
StatusOr<JobView> decode_job(const std::string& kind, const nlohmann::json& object);

// "RLJob/ns/name" and back. parse_key returns false for a malformed key.
std::string job_key(const std::string& kind, const std::string& namespace_,
                    const std::string& name);
bool parse_key(const std::string& key, std::string* kind, std::string* namespace_,
               std::string* name);

}  // namespace tlt::controller
