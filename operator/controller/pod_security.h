// The Pod Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
// applied to the pods the operator creates: every control of a level, at the latest version
// (the rules of k8s.io/pod-security-admission v0.36, policy/check_*.go), so that a pod the
// operator creates is one that Pod Security Admission would admit into a namespace labelled
// pod-security.kubernetes.io/enforce=<level> (tests/operator/pss_differential.sh holds the two to
// the same verdict).
//
// Levels: privileged (no control), baseline, restricted (baseline's controls and its own; where
// restricted has a stricter form of a baseline control, only the stricter one runs). The
// controls, named as the standard names them, and what each refuses:
//   baseline
//     "HostProcess"        securityContext.windowsOptions.hostProcess true (pod or container)
//     "Host Namespaces"    spec.hostNetwork, hostPID, hostIPC true
//     "Privileged Containers"  a container's securityContext.privileged true
//     "Capabilities"       capabilities.add beyond the default set (AUDIT_WRITE, CHOWN,
//                          DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP,
//                          SETGID, SETPCAP, SETUID, SYS_CHROOT)
//     "HostPath Volumes"   volumes[].hostPath
//     "Host Ports"         a container port's hostPort other than 0
//     "Host Probes / Lifecycle Hooks"  a non-empty host in a liveness, readiness or startup
//                          probe's or a postStart/preStop handler's httpGet or tcpSocket
//     "AppArmor"           appArmorProfile.type other than RuntimeDefault, Localhost (pod or
//                          container), or an annotation container.apparmor.security.beta.
//                          kubernetes.io/* other than "", runtime/default, localhost/*
//     "SELinux"            seLinuxOptions.type other than "", container_t, container_init_t,
//                          container_kvm_t, container_engine_t; any user or role
//     "/proc Mount Type"   a container's procMount other than Default, unless spec.hostUsers is
//                          false
//     "Seccomp"            seccompProfile.type other than RuntimeDefault, Localhost
//     "Sysctls"            spec.securityContext.sysctls beyond the safe set
//   restricted (and the above)
//     "Volume Types"       a volume that is not configMap, csi, downwardAPI, emptyDir,
//                          ephemeral, image, persistentVolumeClaim, projected or secret
//                          (replaces HostPath Volumes)
//     "Privilege Escalation"  a container whose allowPrivilegeEscalation is not false
//     "Running as Non-root"   runAsNonRoot false (pod or container), or a container without it
//                          when the pod does not set it true; not checked with hostUsers false
//     "Running as Non-root user"  runAsUser 0 (pod or container); not with hostUsers false
//     "Seccomp"            as baseline, and every container must have a valid profile of its
//                          own or from the pod (replaces baseline's)
//     "Capabilities"       every container drops ALL and adds nothing but NET_BIND_SERVICE
//                          (replaces baseline's)
//     "/proc Mount Type"   procMount other than Default, hostUsers false or not
// Privilege Escalation, Seccomp and Capabilities of restricted do not apply to a pod whose
// spec.os.name is "windows". Containers are those of containers, initContainers and
// ephemeralContainers. JSON null is the field's absence, as on the apiserver; a field of the
// wrong JSON type reads as absent (the reconciler refuses those first, pod_template.h). Never
// throws.
//
// Thread safety: stateless functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::controller {

enum class PodSecurityLevel { kPrivileged, kBaseline, kRestricted };

// "privileged", "baseline", "restricted" -> the level; InvalidArgument naming the three otherwise.
StatusOr<PodSecurityLevel> parse_pod_security_level(const std::string& name);
const char* pod_security_level_name(PodSecurityLevel level);

struct PodSecurityViolation {
  std::string control;  // the standard's name, e.g. "Privilege Escalation"
  std::string field;    // e.g. "spec.roles.rollout.podTemplate.spec.containers[0].securityContext
                        // .allowPrivilegeEscalation"
  std::string detail;   // what is wrong, e.g. "must be false (unset)"
};

// Every violation of `level` by `pod` (a Pod, or a PodTemplateSpec: metadata and spec), each
// field named under `path` (e.g. "spec.roles.rollout.podTemplate"; "" names fields from the
// pod's root, "spec.containers[0]..."). When `written` is given (the PodTemplateSpec the job
// author wrote, of which `pod` was built), containers are named by their index in it, matched by
// name (the n-th container called "x" in the pod is the n-th called "x" in `written`); one that
// is not in `written` (the operator's own) is named by its name, "containers[name=tlt]".
// Empty when the pod meets the level.
std::vector<PodSecurityViolation> check_pod_security(PodSecurityLevel level,
                                                     const nlohmann::json& pod,
                                                     const std::string& path,
                                                     const nlohmann::json* written = nullptr);

// One line for a violation: "<field>: <detail> (Pod Security Standard <level>, control
// <control>)".
std::string describe(const PodSecurityViolation& v, PodSecurityLevel level);

}  // namespace tlt::controller
