// Fuzz target: any JSON given as a job's podTemplate must pass through the operator's reading of
// it (the type check of pod_template.h, the pod policy of pod_policy.h, desired_pod() of
// desired.h) without a crash, a throw, a leak or a hang, and desired_pod() must keep its
// promises for any template: the operator's name, labels, owner, container and restartPolicy
// win. When the template's types are right, the pod it makes has right types too, and when the
// policy allows the template, it allows the pod made from it.
// Input: JSON text; its length's parity picks the job kind (odd: RLJob trainer, even:
// TSTPretrainJob workers); a length of 1 mod 4 gives the RLJob a reward container, so its
// trainer pod carries the reward sidecar.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "operator/controller/desired.h"
#include "operator/controller/pod_policy.h"
#include "operator/controller/pod_template.h"

namespace {

using Json = nlohmann::json;
using namespace tlt::controller;

[[noreturn]] void fail(const char* what, const Json& tmpl, const Json& pod) {
  auto text = [](const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace); };
  std::fprintf(stderr, "%s\ntemplate:\n%s\npod:\n%s\n", what, text(tmpl).c_str(),
               text(pod).c_str());
  std::abort();
}

void check_pod(const JobView& job, const RoleView& role, const Json& pod) {
  const Json& tmpl = role.pod_template;
  const Json& meta = pod["metadata"];
  if (meta["name"] != pod_name(job.meta.name, role.name, 0)) fail("pod name", tmpl, pod);
  if (meta["labels"][kJobLabel] != job.meta.name || meta["labels"][kRoleLabel] != role.name)
    fail("operator labels", tmpl, pod);
  if (!owned_by(pod, job.meta.uid)) fail("ownerReference", tmpl, pod);
  const Json& spec = pod["spec"];
  const Json& tlt = spec["containers"][0];
  if (tlt["name"] != kContainerName || tlt["command"] != Json({"tlt", "run-role"}))
    fail("tlt container", tmpl, pod);
  if (spec["restartPolicy"] != "Never") fail("restartPolicy", tmpl, pod);
  const std::string path = role.path + ".podTemplate";
  if (!check_template_types(tmpl, path).empty()) return;
  Json as_template = {{"metadata", meta}, {"spec", spec}};
  if (!check_template_types(as_template, "pod").empty()) fail("pod of wrong types", tmpl, pod);
  PodPolicy policy;
  check_pod_security_lines(policy, tmpl, pod, path);
  // What the template meets, the pod made of it meets too (the operator only adds defaults).
  if (check_pod_security(PodSecurityLevel::kRestricted, tmpl, path).empty() &&
      !check_pod_security(PodSecurityLevel::kRestricted, pod, "pod").empty())
    fail("the template meets restricted but not its pod", tmpl, pod);
  if (!check_pod_template(policy, tmpl, path).empty()) return;
  policy.service_accounts.push_back(identity_name(job.meta.kind, job.meta.name));
  policy.allow_automount_token = true;  // the operator's own choice for the progress pod
  if (!check_pod_template(policy, as_template, "pod").empty())
    fail("the policy allows the template but not its pod", tmpl, pod);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Json tmpl = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (tmpl.is_discarded()) return 0;
  JobView job;
  job.meta.kind = size % 2 ? "RLJob" : "TSTPretrainJob";
  job.meta.namespace_ = "ns";
  job.meta.name = "fuzz";
  job.meta.uid = "uid-1";
  job.labels = {{"team", "a"}};
  job.completion_role = size % 2 ? "trainer" : "workers";
  RoleView role;
  role.name = job.completion_role;
  role.replicas = 1;
  role.path = size % 2 ? "spec.roles.trainer" : "spec.workers";
  role.pod_template = std::move(tmpl);
  job.roles = {role};
  if (size % 4 == 1) {  // an RLJob trainer that carries the reward sidecar (reward_sidecar.h)
    job.document = {{"spec",
                     {{"reward",
                       {{"type", "command"},
                        {"container", {{"image", "r:1"}, {"command", {"python3", "r.py"}}}}}}}}};
  }
  try {
    check_pod_template(PodPolicy{}, role.pod_template, role.path + ".podTemplate");
    check_pod(job, role, desired_pod(job, role, 0, PodOptions{}));
  } catch (const std::exception& e) {
    fail(e.what(), role.pod_template, Json());
  }
  return 0;
}
