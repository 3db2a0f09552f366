// The reward sidecar of trainer pods and the http reward URL allow-list (reward_sidecar.h).
#include "operator/controller/reward_sidecar.h"

#include "api/spec.h"
#include "operator/controller/reconciler.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

// The sidecar's shell script: waits for both FIFOs, then runs "$@" (the user command) on them;
// `sleep 0.2` where the image's sleep takes fractions, else whole seconds.
std::string wait_then_exec() {
  return std::string("d=") + kRewardPipeDir +
         "; while [ ! -p \"$d/requests\" ] || [ ! -p \"$d/rewards\" ]; do "
         "sleep 0.2 2>/dev/null || sleep 1; done; "
         "exec \"$@\" < \"$d/requests\" > \"$d/rewards\"";
}

// object[key] when `object` is an object holding a value of that JSON type, else `fallback`.
Json field(const Json& object, const char* key, const Json& fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->type() == fallback.type() ? *it : fallback;
}

// spec.reward of the job's document (api::to_json of the spec, defaults filled in); {} when
// the job has none (a TSTPretrainJob).
Json reward_of(const JobView& job) {
  return field(field(job.document, "spec", Json::object()), "reward", Json::object());
}

// Every string of a JSON array of strings; other entries are skipped.
std::vector<std::string> strings(const Json& list) {
  std::vector<std::string> out;
  for (const Json& s : list) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

// The user command the sidecar execs: container.command, else spec.reward.command.
std::vector<std::string> user_command(const Json& reward) {
  std::vector<std::string> own =
      strings(field(field(reward, "container", Json::object()), "command", Json::array()));
  return own.empty() ? strings(field(reward, "command", Json::array())) : own;
}

// Replaces the entry of `list` whose name equals item's, or appends.
void put_named(Json* list, const Json& item) {
  if (!list->is_array()) *list = Json::array();
  for (Json& e : *list) {
    if (e.is_object() && field(e, "name", "") == item["name"]) {
      e = item;
      return;
    }
  }
  list->push_back(item);
}

Json pipe_mount() {
  return {{"name", kRewardVolume}, {"mountPath", kRewardPipeDir}};
}

}  // namespace

bool wants_reward_sidecar(const JobView& job, const RoleView& role) {
  if (job.meta.kind != api::kRLJobKind || role.name != "trainer") return false;
  Json reward = reward_of(job);
  return field(reward, "type", "") == "command" &&
         !field(field(reward, "container", Json::object()), "image", "").get<std::string>().empty();
}

Json reward_sidecar(const Json& reward) {
  Json container = field(reward, "container", Json::object());
  Json command = {"/bin/sh", "-c", wait_then_exec(), kRewardContainerName};
  for (const std::string& arg : user_command(reward)) command.push_back(arg);
  Json env = Json::array();
  Json user_env = field(container, "env", Json::object());
  for (const auto& [name, value] : user_env.items()) {
    if (value.is_string()) env.push_back({{"name", name}, {"value", value}});
  }
  // Python's stdout to a FIFO is block-buffered: an answer that is never flushed would stall
  // until spec.reward.timeout (the runtime's rule for the programs it starts itself).
  if (!user_env.contains(kUnbufferedEnv)) env.push_back({{"name", kUnbufferedEnv}, {"value", "1"}});
  Json c = {{"name", kRewardContainerName},
            {"image", field(container, "image", "")},
            {"command", command},
            {"restartPolicy", "Always"},
            {"volumeMounts", Json::array({pipe_mount()})},
            {"securityContext",
             {{"runAsNonRoot", true},
              {"allowPrivilegeEscalation", false},
              {"capabilities", {{"drop", {"ALL"}}}},
              {"seccompProfile", {{"type", "RuntimeDefault"}}}}}};
  c["env"] = env;
  Json resources = Json::object();
  for (const char* side : {"requests", "limits"}) {  // the spec's empty maps are left out
    Json quantities = field(field(container, "resources", Json::object()), side, Json::object());
    if (!quantities.empty()) resources[side] = quantities;
  }
  if (!resources.empty()) c["resources"] = resources;
  return c;
}

void add_reward_sidecar(const JobView& job, const RoleView& role, Json* pod_spec) {
  if (!wants_reward_sidecar(job, role)) return;
  Json& spec = *pod_spec;
  put_named(&spec["initContainers"], reward_sidecar(reward_of(job)));
  put_named(&spec["volumes"], {{"name", kRewardVolume}, {"emptyDir", Json::object()}});
  if (!spec["containers"].is_array()) spec["containers"] = Json::array();
  for (Json& c : spec["containers"]) {
    if (!c.is_object() || field(c, "name", "") != kContainerName) continue;
    put_named(&c["volumeMounts"], pipe_mount());
    put_named(&c["env"], {{"name", kRewardPipeEnv}, {"value", kRewardPipeDir}});
  }
}

bool reward_url_allowed(const std::string& url, const std::vector<std::string>& allowed) {
  for (std::string a : allowed) {
    while (!a.empty() && a.back() == '/') a.pop_back();
    if (a.empty()) continue;
    if (url == a || url.rfind(a + "/", 0) == 0) return true;
  }
  return false;
}

std::optional<RewardRefusal> check_cluster_reward(const JobView& job,
                                                  const std::vector<std::string>& allowed_urls) {
  if (job.meta.kind != api::kRLJobKind) return std::nullopt;
  Json reward = reward_of(job);
  std::string type = field(reward, "type", "");
  if (type == "http") {
    std::string url = field(reward, "url", "");
    if (reward_url_allowed(url, allowed_urls)) return std::nullopt;
    return RewardRefusal{
        kRewardURLNotAllowed,
        "spec.reward.url \"" + url +
            "\" is not in the operator's allow-list (--reward-url-allow, Helm "
            "reward.allowedURLs): ask the cluster admin to allow it, or score with "
            "spec.reward.container (type command) instead"};
  }
  bool has_image =
      !field(field(reward, "container", Json::object()), "image", "").get<std::string>().empty();
  if (type == "command" && has_image && user_command(reward).empty()) {
    return RewardRefusal{
        kInvalidSpec,
        "spec.reward.container.command: is required when spec.reward.command is empty (the "
        "reward sidecar runs it on the trainer's FIFOs, so the image's entrypoint is not "
        "used); give the program and its arguments, e.g. [python3, /app/reward.py]"};
  }
  return std::nullopt;
}

}  // namespace tlt::controller
