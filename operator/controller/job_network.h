// The job's network surface, as pure functions of its spec: the Secret its processes prove
// membership with (runtime/cluster/job_secret.h), where its pods get that Secret and their
// apiserver token, and the NetworkPolicy that fences its ports. docs/security.md, "The job's
// network surface", says what each part stops and what a cluster without NetworkPolicy keeps.
//
//   - Secret <service>-secret (<job>-rl-secret, <job>-tst-secret), labelled and owned like every
//     child (desired.h), immutable, type Opaque, data.secret = 64 lowercase hex digits (32 random
//     bytes that the reconciler draws: cluster::generate_job_secret). It is written once, when
//     created, and never applied, patched or rotated afterwards: the job's running pods hold its
//     value. A Secret of that name that the job does not own is never adopted (the job fails with
//     reason JobSecretNotOwned, reconciler.h).
//   - In each pod only the "tlt" container mounts it: read-only, at cluster::kSecretMountDir,
//     volume kJobSecretVolume (defaultMode 0444, so the container's user reads it whatever its
//     uid), with TLT_JOB_SECRET_FILE=<kSecretMountDir>/secret in its env. Sidecars, the reward
//     sidecar and init containers get neither.
//   - The pod's automountServiceAccountToken is false. A pod whose runtime uses the apiserver
//     (desired.h: an RLJob's trainer 0) gets instead a projected volume kTokenVolume: a bound
//     token of the pod's ServiceAccount (expirationSeconds 3607, what the ServiceAccount admission
//     plugin asks for), ca.crt from the ConfigMap kube-root-ca.crt and the namespace from the
//     downward API, mounted read-only into "tlt" only at kTokenMountDir, where kube/kubeconfig.h's
//     in-cluster credentials read them. A podTemplate that sets automountServiceAccountToken
//     itself (true needs the admin's --pod-policy-allow) gets what it set and no projected token.
//   - NetworkPolicy <service> (<job>-rl, <job>-tst) while options.enabled: podSelector the job's
//     pods (tlt.dev/job, tlt.dev/kind), policyTypes [Ingress], and two ingress rules:
//       from the job's own pods, on every port: the trainer's rendezvous (29500), weight-sync
//         (29501) and trainer-group (29502) ports, and the Gloo pair connections of the
//         weight-sync, trainer and data-parallel groups, which land on ports each rank picks at
//         run time (so no narrower rule lets a group form);
//       from pods in the namespaces that options.metrics_from selects (every namespace when it is
//         empty), on spec.metrics.port (TCP) only; no such rule when that port is 0 (off).
//     Any other ingress is dropped by a network plugin that enforces NetworkPolicy; egress is not
//     restricted. Off (--job-network-policy=false), the job has no NetworkPolicy (one made
//     before is deleted).
//   - check_job_credentials(): a podTemplate may not mount kJobSecretVolume or kTokenVolume in
//     any container but "tlt", nor name a job secret (a Secret named *-rl-secret or *-tst-secret:
//     the names are reserved) in a volume, env or envFrom, nor set shareProcessNamespace true
//     (a sidecar of the pod's user could then read the tlt container's files via /proc).
//
// Thread safety: plain values and stateless functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "operator/controller/job.h"

namespace tlt::controller {

inline constexpr const char* kJobSecretKey = "secret";             // the Secret's data key
inline constexpr const char* kJobSecretVolume = "tlt-job-secret";  // in the tlt container only
inline constexpr const char* kTokenVolume = "tlt-token";           // in the tlt container only
inline constexpr const char* kTokenMountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
// The bound token's lifetime the ServiceAccount admission plugin asks for; the apiserver extends
// it (--service-account-extend-token-expiration) and the kubelet refreshes the file.
inline constexpr int64_t kTokenExpirationSeconds = 3607;

struct NetworkPolicyOptions {
  bool enabled = true;  // --job-network-policy
  // matchLabels of the namespaceSelector whose pods may reach the metrics port, e.g.
  // {"kubernetes.io/metadata.name": "monitoring"}; empty: pods of every namespace.
  std::map<std::string, std::string> metrics_from;

  // Adds "key=value" (--network-policy-metrics-from) to metrics_from. InvalidArgument naming the
  // flag and the fix when it is not a Kubernetes label key and value, or repeats a key.
  Status add_metrics_from(const std::string& term);
};

// "<job>-rl-secret" (RLJob), "<job>-tst-secret" (TSTPretrainJob).
std::string job_secret_name(const std::string& kind, const std::string& job);
// Whether `name` has the form of a job secret's name (reserved: see the top).
bool is_job_secret_name(const std::string& name);
// "<job>-rl", "<job>-tst".
std::string network_policy_name(const std::string& kind, const std::string& job);

// The job's Secret holding `secret_hex` (the hex text itself is the secret's bytes, as
// runtime/cluster/job_secret.h reads them).
nlohmann::json desired_job_secret(const JobView& job, const std::string& secret_hex);
// The job's NetworkPolicy (see the top); also when !options.enabled (the caller decides).
nlohmann::json desired_network_policy(const JobView& job, const NetworkPolicyOptions& options);

// Mounts the job's Secret and, when `uses_apiserver`, the projected token into the container
// named "tlt" of `pod_spec` (a pod's spec with its containers merged), adds their volumes, sets
// TLT_JOB_SECRET_FILE, and automountServiceAccountToken false unless the spec has it.
void add_job_credentials(const JobView& job, bool uses_apiserver, nlohmann::json* pod_spec);

// Every way `pod_template` (at `path` in the job) reaches for the job's credentials (see the
// top), one line each, naming the field and the fix. Fields of the wrong JSON type are skipped
// (pod_template.h refuses them first).
std::vector<std::string> check_job_credentials(const nlohmann::json& pod_template,
                                               const std::string& path);

}  // namespace tlt::controller
