// The JSON types of a job author's podTemplate, checked before the operator reads it.
//
// The CRDs keep podTemplate as x-kubernetes-preserve-unknown-fields, so the apiserver stores any
// JSON there (`volumes: [{name: n}]` is the boolean false in YAML 1.1). Every field of the
// PodTemplateSpec that the operator reads, merges into or polices (desired.h, pod_policy.h), and
// the scalars next to them that a job author commonly writes, must have its Kubernetes type:
//   metadata                       object; labels, annotations: objects of strings; name,
//                                  generateName, namespace: strings; finalizers: strings
//   spec                           object
//   spec.containers, initContainers, ephemeralContainers: lists of objects, each with
//     name, image, imagePullPolicy, workingDir: strings; command, args: lists of strings;
//     env: objects {name, value: strings; valueFrom: object}; envFrom: objects;
//     volumeMounts: objects {name, mountPath, subPath: strings; readOnly: boolean};
//     ports: objects {containerPort, hostPort: integers; name, protocol: strings};
//     resources: object {requests, limits: objects};
//     securityContext: object (container fields below)
//   spec.volumes                   objects {name: string; hostPath, configMap, secret,
//                                  emptyDir, ...: objects}
//   spec.securityContext           object: runAsNonRoot: boolean; runAsUser, runAsGroup,
//                                  fsGroup: integers; seccompProfile, windowsOptions: objects
//   spec.hostNetwork, hostPID, hostIPC, automountServiceAccountToken, shareProcessNamespace:
//                                  booleans
//   spec.serviceAccountName, serviceAccount, nodeName, priorityClassName, schedulerName,
//     hostname, subdomain, restartPolicy: strings; nodeSelector: object of strings;
//     tolerations, imagePullSecrets: lists of objects
// A container's securityContext: privileged, allowPrivilegeEscalation, readOnlyRootFilesystem,
// runAsNonRoot: booleans; runAsUser, runAsGroup: integers; capabilities {add, drop: lists of
// strings}; windowsOptions {hostProcess: boolean}; seccompProfile {type: string}; procMount:
// string. JSON null is the field's absence, as on the apiserver. Fields not listed are left to
// the apiserver's own pod validation.
//
// Thread safety: stateless functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tlt::controller {

// The most problems check_template_types() lists; one more line says how many were left out.
inline constexpr size_t kMaxTypeErrors = 10;

// Every field of `pod_template` (found at `path` in the job, e.g.
// "spec.roles.rollout.podTemplate") whose JSON type is wrong, one line each:
//   "spec.roles.rollout.podTemplate.spec.volumes[0].name: must be a string (got false)"
// Empty when every listed field has its type (a template that is not an object is one line).
std::vector<std::string> check_template_types(const nlohmann::json& pod_template,
                                              const std::string& path);

}  // namespace tlt::controller
