// A job's reward on a cluster (spec.reward, api/spec.h RewardSpec): the sidecar that runs a
// `command` reward from the author's image next to the trainer, and the admin's allow-list of
// `http` reward URLs.
//
// Sidecar. An RLJob whose spec.reward is type command with container.image set gets, in every
// trainer pod, a native sidecar (an initContainer with restartPolicy Always, Kubernetes >= 1.29;
// the chart asks for >= 1.30) named "reward":
//   - image, env and resources from spec.reward.container, the env with PYTHONUNBUFFERED=1
//     unless container.env sets it (as the runtime gives a program it starts: a Python
//     program's answers reach the FIFO unflushed; reward::program_environment);
//   - command ["/bin/sh", "-c", <wait, then exec>, "reward", <user command...>], the user command
//     being container.command, or spec.reward.command when that is empty: it waits until the
//     FIFOs kRewardPipeDir/requests and kRewardPipeDir/rewards exist, then execs the user
//     command with stdin from `requests` and stdout to `rewards`. The image needs /bin/sh;
//     the shell opens `requests` for reading first, then `rewards` for writing (each open
//     blocks until the trainer opens the other end);
//   - the emptyDir volume kRewardVolume mounted at kRewardPipeDir, as in the trainer's "tlt"
//     container, which also gets kRewardPipeEnv=kRewardPipeDir (the runtime then creates the
//     FIFOs and talks to them instead of starting the command itself);
//   - the operator's securityContext, replacing whatever the template's initContainer of that
//     name said: runAsNonRoot, allowPrivilegeEscalation false, capabilities drop ALL, seccomp
//     RuntimeDefault (the `restricted` Pod Security Standard). It runs as the pod's user
//     (runAsUser/runAsGroup, kRuntimeUser unless the podTemplate says otherwise), so it may
//     read and write the FIFOs the trainer made.
// Being a native sidecar, it starts before the trainer, is restarted by the kubelet when the
// program exits (the trainer reopens the FIFOs on a retry), and is stopped when the trainer's
// container ends, so the pod completes with the trainer. The name "reward" is the operator's: a
// template's initContainer of that name is replaced.
// A `command` reward without container.image runs inside the trainer container (the runtime
// image), as `tlt run` runs it locally: no sidecar.
//
// URL allow-list. A job whose spec.reward is type http runs only when spec.reward.url equals,
// or lies below, an entry of the operator's --reward-url-allow (Helm reward.allowedURLs); the
// rule is that of --prometheus-url-allow (rebalancer.h prometheus_url_allowed). The trainer,
// not the operator, posts to the URL; the list keeps the runtime's HTTP client off endpoints the
// admin has not approved. It is no network boundary: a command reward runs the author's code in
// the pod.
//
// Thread safety: stateless functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/controller/job.h"

namespace tlt::controller {

inline constexpr const char* kRewardContainerName = "reward";
inline constexpr const char* kRewardVolume = "tlt-reward";
inline constexpr const char* kRewardPipeDir = "/var/run/tlt-reward";
inline constexpr const char* kRewardPipeEnv = "TLT_REWARD_PIPE_DIR";
inline constexpr const char* kUnbufferedEnv = "PYTHONUNBUFFERED";
// The Failed reason of a job whose http reward URL the admin does not allow.
inline constexpr const char* kRewardURLNotAllowed = "RewardURLNotAllowed";

// Whether the pods of `role` carry the reward sidecar: an RLJob's trainer, when spec.reward is
// type command with container.image set.
bool wants_reward_sidecar(const JobView& job, const RoleView& role);

// The sidecar container of `reward` (spec.reward as JSON, defaults filled in), shaped as above.
nlohmann::json reward_sidecar(const nlohmann::json& reward);

// When wants_reward_sidecar(job, role): adds the sidecar to pod_spec.initContainers, the
// emptyDir volume to pod_spec.volumes, and the mount and kRewardPipeEnv to the container named
// kContainerName in pod_spec.containers. Otherwise leaves pod_spec as it is. Expects the
// containers, initContainers and volumes that are present to be arrays (pod_template.h checks
// them); others are replaced.
void add_reward_sidecar(const JobView& job, const RoleView& role, nlohmann::json* pod_spec);

// Whether `url` equals an entry of `allowed` or lies below it (the entry followed by "/...");
// trailing slashes of the entries are ignored, empty entries allow nothing.
bool reward_url_allowed(const std::string& url, const std::vector<std::string>& allowed);

struct RewardRefusal {
  std::string reason;   // kRewardURLNotAllowed, or kInvalidSpec (reconciler.h)
  std::string message;  // names the field and the fix
};

// Why `job`'s reward cannot run on this cluster, or nullopt when it can:
//   - type http with spec.reward.url not allowed by `allowed_urls` -> kRewardURLNotAllowed;
//   - a reward container with no command (container.command and spec.reward.command both
//     empty: the sidecar must exec a command, not the image's entrypoint) -> "InvalidSpec".
std::optional<RewardRefusal> check_cluster_reward(const JobView& job,
                                                  const std::vector<std::string>& allowed_urls);

}  // namespace tlt::controller
