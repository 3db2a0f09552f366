// The reconciler: observe, finalizer, validate, sub-reconcilers, pods, status; one decision per
// line. The children other than pods are reconcile_children.cc's.
#include "operator/controller/reconciler.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "api/spec.h"
#include "operator/controller/log.h"
#include "operator/controller/pod_template.h"
#include "operator/controller/pods_pending.h"
#include "operator/controller/reward_sidecar.h"
#include "operator/controller/trainer_world.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;
using std::chrono::seconds;

std::string id(const ObservedJob& job) {
  return job.namespace_ + "/" + job.name;
}

int parse_index(const std::string& s) {
  if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), ::isdigit)) return -1;
  return std::atoi(s.c_str());
}

// The stored Failed condition's reason ("" when none is True).
std::string failed_reason(const Json& status) {
  for (const Json& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == "Failed" && c.value("status", "") == "True")
      return c.value("reason", "");
  }
  return "";
}

// A field ("reason", "message") of the stored condition of `type`; "" when none.
std::string condition_field(const Json& status, const std::string& type, const char* field) {
  for (const Json& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == type) return c.value(field, "");
  }
  return "";
}

std::string condition_message(const Json& status, const std::string& type) {
  return condition_field(status, type, "message");
}

bool terminal_phase(const std::string& p) {
  return p == "Succeeded" || p == "Failed";
}

// Failed for a reason that an edit of the spec (or of the admin's policy) can take away: such a
// job is looked at again on every pass instead of being kept as finished.
bool refused_reason(const std::string& reason) {
  return reason == kInvalidSpec || reason == kForbiddenByPodPolicy || reason == kReconcileError ||
         reason == kRewardURLNotAllowed || reason == kJobSecretNotOwned;
}

// Every field of the job's podTemplates whose JSON type is wrong (pod_template.h), one line each.
std::vector<std::string> template_type_errors(const JobView& job) {
  std::vector<std::string> out;
  for (const RoleView& role : job.roles) {
    for (std::string& e : check_template_types(role.pod_template, role.path + ".podTemplate"))
      out.push_back(std::move(e));
  }
  return out;
}

// Every way the job's podTemplates, and the pods made of them, break the admin's pod policy
// (pod_policy.h), one line each. A role's pods differ only in names and environment, which no
// rule looks at: its pod 0 stands for all.
std::vector<std::string> policy_violations(const JobView& job, const PodOptions& options) {
  std::vector<std::string> out;
  for (const RoleView& role : job.roles) {
    const std::string path = role.path + ".podTemplate";
    for (std::string& v : check_pod_template(options.policy, role.pod_template, path))
      out.push_back(std::move(v));
    for (std::string& v : check_job_credentials(role.pod_template, path))
      out.push_back(std::move(v));
    Json pod = desired_pod(job, role, 0, options);
    for (std::string& v : check_pod_security_lines(options.policy, role.pod_template, pod, path))
      out.push_back(std::move(v));
  }
  return out;
}

std::string join(const std::vector<std::string>& lines, const std::string& separator) {
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : separator) + l;
  return out;
}

// Runs fn(0) ... fn(n-1) with up to `width` calls in flight (the calling thread is one of them)
// and returns their statuses by index. An exception thrown by a call is rethrown on the calling
// thread once every call has ended (the first one caught), never left to end the process.
std::vector<Status> run_parallel(int n, int width, const std::function<Status(int)>& fn) {
  std::vector<Status> out(static_cast<size_t>(std::max(n, 0)));
  std::atomic<int> next{0};
  std::mutex thrown_mu;
  std::exception_ptr thrown;  // guarded by thrown_mu
  auto work = [&] {
    for (int i = next++; i < n; i = next++) {
      try {
        out[static_cast<size_t>(i)] = fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(thrown_mu);
        if (!thrown) thrown = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::min(n, width); ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: fewer in flight
    }
  }
  work();
  for (std::thread& t : threads) t.join();
  if (thrown) std::rethrow_exception(thrown);
  return out;
}

}  // namespace

Reconciler::Reconciler(kube::KubeClient* client, Cache* cache, EventRecorder* events,
                       const Clock* clock, ReconcilerOptions options)
    : client_(client),
      cache_(cache),
      events_(events),
      clock_(clock),
      options_(std::move(options)) {}

LogFields Reconciler::fields(const ObservedJob& job, LogFields more) {
  LogFields f{{"kind", job.kind}, {"job", id(job)}};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

ReconcileResult Reconciler::reconcile(const std::string& key) {
  std::string kind, ns, name;
  if (!parse_key(key, &kind, &ns, &name))
    return {Status::InvalidArgument("malformed key \"" + key + "\""), std::nullopt, ""};
  std::optional<Json> object = cache_->get(job_resource(kind, ns), name);
  if (!object) return {Status::Ok(), std::nullopt, ""};
  std::string what;
  try {
    return reconcile_job(kind, *object);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an unknown exception";
  }
  return contain(key, kind, *object, what);
}

ReconcileResult Reconciler::contain(const std::string& key, const std::string& kind,
                                    const Json& object, const std::string& what) {
  log_error("Reconciling a job threw; the job is marked Failed and the other jobs go on.",
            {{"key", key}, {"error", what}});
  try {
    ObservedJob meta = observe_job(kind, object);
    return refuse(meta, kReconcileError,
                  "The operator could not reconcile " + kind + " " + id(meta) + ": " + what +
                      "; it is looked at again when the job changes.",
                  "The job could not be reconciled; no pods will be created.");
  } catch (const std::exception& e) {
    return {Status::Internal("reconciling " + key + " threw: " + what +
                             "; recording it threw: " + e.what()),
            std::nullopt, ""};
  } catch (...) {
    return {Status::Internal("reconciling " + key + " threw: " + what), std::nullopt, ""};
  }
}

ReconcileResult Reconciler::reconcile_job(const std::string& kind, const Json& object) {
  ObservedJob meta = observe_job(kind, object);
  std::string phase = meta.status.value("phase", "");
  if (meta.deleting) return {finalize(meta, object), std::nullopt, phase};
  if (Status s = ensure_finalizer(meta); !s.ok()) return {s, std::nullopt, phase};
  if (Status s = adopt_strays(meta); !s.ok()) return {s, std::nullopt, phase};
  StatusOr<JobView> job = decode_job(kind, object);
  if (!job.ok()) {
    std::string message = job.status().message();
    std::replace(message.begin(), message.end(), '\n', ';');
    return refuse(meta, kInvalidSpec, "The spec is invalid: " + message,
                  "The spec is invalid; no pods will be created.", true);
  }
  if (std::vector<std::string> wrong = template_type_errors(*job); !wrong.empty()) {
    return refuse(meta, kInvalidSpec, "The spec is invalid: " + join(wrong, "; "),
                  "The spec is invalid; no pods will be created.", true);
  }
  if (std::vector<std::string> violations = policy_violations(*job, options_.pod);
      !violations.empty()) {
    return refuse(meta, kForbiddenByPodPolicy,
                  "The operator's pod policy refuses the podTemplate: " + join(violations, "; "),
                  "The pod policy refuses the podTemplate; no pods will be created.", true);
  }
  if (auto r = check_cluster_reward(*job, options_.pod.reward_url_allow))
    return refuse(meta, r->reason, r->message,
                  "The job's reward is refused; no pods will be created.", true);
  std::vector<Pod> pods = observe_pods(meta);
  std::optional<Progress> progress = read_progress(*job, pods);
  if (terminal_phase(phase) && !refused_reason(failed_reason(meta.status)))
    return finished(*job, pods, std::move(progress));

  if (Status s = reconcile_secret(*job); !s.ok()) {
    if (s.code() != StatusCode::kAlreadyExists) return stuck(*job, pods, s, Outcome{});
    return refuse(meta, kJobSecretNotOwned, s.message(),
                  "The job's Secret name is taken by another's Secret; no pods will be created.",
                  true);
  }
  // The ConfigMap, the Service, the identity and the NetworkPolicy do not depend on each other:
  // all at once; the pods need the first three (a pod naming a ServiceAccount that does not exist
  // is refused).
  Status (Reconciler::*const subs[])(const JobView&) = {
      &Reconciler::reconcile_configmap, &Reconciler::reconcile_service,
      &Reconciler::reconcile_identity, &Reconciler::reconcile_network_policy};
  Outcome outcome;
  outcome.progress = std::move(progress);
  const JobView running = running_view(*job, pods, &outcome);
  for (const Status& s : run_parallel(4, 4, [&](int i) { return (this->*subs[i])(running); })) {
    if (!s.ok()) return stuck(running, pods, s, std::move(outcome));
  }
  Status s = reconcile_pods(running, pods, &outcome);
  if (!s.ok()) return stuck(running, pods, s, std::move(outcome));
  s = write_status(meta, outcome);
  if (!s.ok()) return {s, std::nullopt, phase};
  Json computed = compute_status(kind, meta.status, outcome, meta.generation, clock_->now());
  std::string now_phase = computed.value("phase", "");
  // A job that just finished comes back once for its TTL and leftover pods.
  if (terminal_phase(now_phase)) return {Status::Ok(), seconds(1), now_phase};
  return {Status::Ok(), outcome.recheck_after, now_phase};
}

Status Reconciler::ensure_finalizer(const ObservedJob& job) {
  if (std::find(job.finalizers.begin(), job.finalizers.end(), kFinalizer) != job.finalizers.end())
    return Status::Ok();
  Json finalizers = job.finalizers;
  finalizers.push_back(kFinalizer);
  Json patch = {
      {"metadata", {{"finalizers", finalizers}, {"resourceVersion", job.resource_version}}}};
  kube::Resource r = job_resource(job.kind, job.namespace_);
  StatusOr<Json> out = client_->patch(r, job.name, patch);
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  log_info("Added the cleanup finalizer.", fields(job, {{"finalizer", kFinalizer}}));
  return Status::Ok();
}

ReconcileResult Reconciler::refuse(const ObservedJob& job, const std::string& reason,
                                   const std::string& message, const std::string& log_message,
                                   bool remove_pods) {
  if (remove_pods) {
    // Pods made while the spec (or the admin's policy) allowed them.
    std::vector<Pod> pods = observe_pods(job);
    std::vector<const Pod*> live;
    for (const Pod& p : pods) {
      if (!p.deleting) live.push_back(&p);
    }
    Status s = delete_pods(job, live, reason);
    if (s.ok()) s = remove_workload(job, "the job is refused (" + reason + ")");
    if (!s.ok()) return {s, std::nullopt, job.status.value("phase", "")};
  }
  Outcome o;
  o.terminal = "Failed";
  o.terminal_reason = reason;
  o.terminal_message = message;
  o.restarts = job.status.value("restarts", 0);
  Json computed = compute_status(job.kind, job.status, o, job.generation, clock_->now());
  if (status_changed(job.status, computed)) {
    log_info(log_message, fields(job, {{"reason", reason}, {"errors", message}}));
    event(job, "Warning", reason, message);
  }
  return {write_status(job, o), std::nullopt, "Failed"};
}

std::vector<Reconciler::Pod> Reconciler::observe_pods(const ObservedJob& job) {
  std::vector<Pod> pods;
  for (const Json& o : cache_->by_job(pod_resource(job.namespace_), job.name)) {
    if (!owned_by(o, job.uid)) continue;
    Pod p;
    const Json& meta = o["metadata"];
    p.name = meta.value("name", "");
    p.uid = meta.value("uid", "");
    Json labels = meta.value("labels", Json::object());
    p.role = labels.value(kRoleLabel, "");
    p.index = parse_index(labels.value(kIndexLabel, ""));
    p.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
    Json status = o.value("status", Json::object());
    p.phase = status.value("phase", "Pending");
    for (const Json& c : status.value("conditions", Json::array())) {
      if (c.value("type", "") == "Ready" && c.value("status", "") == "True")
        p.ready = p.phase == "Running";
    }
    p.trainer_world = labels.value(kTrainerWorldLabel, "");
    p.created = parse_time(meta.value("creationTimestamp", ""));
    for (const Json& c : status.value("conditions", Json::array())) {
      if (c.value("type", "") != "PodScheduled" || c.value("status", "") != "False") continue;
      p.unscheduled_reason = c.value("reason", "");
      p.unscheduled_message = c.value("message", "");
    }
    Json annotations = meta.value("annotations", Json::object());
    auto a = annotations.find(kProgressAnnotation);
    if (a != annotations.end()) p.progress = a->is_string() ? a->get<std::string>() : a->dump();
    pods.push_back(std::move(p));
  }
  return pods;
}

JobView Reconciler::running_view(const JobView& job, const std::vector<Pod>& pods, Outcome* o) {
  if (job.meta.kind != api::kRLJobKind) return job;
  const RoleView* trainer = nullptr;
  for (const RoleView& r : job.roles) {
    if (r.name == "trainer") trainer = &r;
  }
  if (!trainer) return job;
  std::vector<TrainerPod> live;
  for (const Pod& p : pods) {
    if (p.role == "trainer" && !p.deleting) live.push_back({p.index, p.trainer_world});
  }
  o->trainer_replicas = trainer->replicas;
  o->trainer_world = running_trainer_world(live).value_or(trainer->replicas);
  if (o->trainer_world == o->trainer_replicas) return job;
  Json condition = trainer_scale_condition(job.meta.status, o->trainer_replicas, o->trainer_world,
                                           job.meta.generation, format_time(clock_->now()));
  if (condition_field(job.meta.status, kTrainerScalePending, "status") != "True" ||
      condition_field(job.meta.status, kTrainerScalePending, "message") != condition["message"]) {
    log_warning(
        "spec.roles.trainer.replicas differs from the running trainer group's world; "
        "keeping the world.",
        fields(job.meta, {{"replicas", std::to_string(o->trainer_replicas)},
                          {"world", std::to_string(o->trainer_world)}}));
    event(job.meta, "Warning", kTrainerScalePending, condition["message"]);
  }
  return with_trainer_world(job, o->trainer_world);
}

std::optional<Progress> Reconciler::read_progress(const JobView& job,
                                                  const std::vector<Pod>& pods) {
  std::vector<PodProgress> reports;
  for (const Pod& p : pods) {
    if (!p.progress) continue;
    StatusOr<Progress> parsed = parse_progress(*p.progress);
    if (parsed.ok()) {
      reports.push_back({p.name, p.role, p.index, std::move(parsed).value()});
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(warned_mu_);
      if (warned_.size() > 10000) warned_.clear();  // bounded; at worst a repeated warning
      if (!warned_.insert(p.uid + " " + *p.progress).second) continue;
    }
    std::string why = parsed.status().message();
    log_warning("A pod's progress report is unreadable; ignoring it.",
                fields(job.meta, {{"pod", p.name}, {"error", why}}));
    events_->record(job.meta, "Warning", "ProgressUnreadable",
                    "Pod " + p.name + " has an unreadable " + kProgressAnnotation +
                        " annotation (" + why + "); it is ignored.");
  }
  const PodProgress* lead = leading_progress(reports, job.completion_role);
  if (!lead) return std::nullopt;
  return lead->progress;
}

Status Reconciler::delete_pods(const ObservedJob& job, std::vector<const Pod*> pods,
                               const std::string& why) {
  if (pods.empty()) return Status::Ok();
  std::string names;
  for (const Pod* p : pods) {
    Status s = client_->remove(pod_resource(job.namespace_), p->name);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
    cache_->deleted(pod_resource(job.namespace_), p->name);
    log_info("Deleted a pod.",
             fields(job, {{"pod", p->name}, {"phase", p->phase}, {"reason", why}}));
    names += (names.empty() ? "" : ", ") + p->name;
  }
  event(job, why == "PodFailed" ? "Warning" : "Normal", why, "Deleted pods " + names + ".");
  return Status::Ok();
}

std::vector<const Reconciler::Pod*> Reconciler::tally(const std::vector<Pod>& pods, Outcome* o) {
  std::vector<const Pod*> live;
  for (const Pod& p : pods) {
    if (p.deleting) continue;
    live.push_back(&p);
    RoleCounts& c = o->roles[p.role];
    ++c.replicas;
    c.ready += p.ready;
    c.succeeded += p.phase == "Succeeded";
    c.failed += p.phase == "Failed";
  }
  return live;
}

ReconcileResult Reconciler::stuck(const JobView& job, const std::vector<Pod>& pods,
                                  const Status& why, Outcome o) {
  const std::string phase = job.meta.status.value("phase", "");
  StatusCode code = why.code();
  if (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
      code == StatusCode::kAborted)
    return {why, std::nullopt, phase};  // transient: back off and retry, nothing to tell
  if (o.roles.empty()) {                // refused before the pods were looked at
    tally(pods, &o);
    o.restarts = job.meta.status.value("restarts", 0);
  }
  o.desired_pods = 0;
  for (const RoleView& r : job.roles) o.desired_pods += r.replicas;
  o.created = false;
  o.blocked_reason = kube::api_reason(why);
  o.blocked_message = why.message();
  if (o.blocked_message.size() > kMaxRefusalMessage)
    o.blocked_message = o.blocked_message.substr(0, kMaxRefusalMessage) + "... (truncated)";
  // Told once per refusal: the counts in status may change while the same write is refused.
  const Json& stored = job.meta.status;
  if (condition_field(stored, "Created", "reason") != o.blocked_reason ||
      condition_field(stored, "Created", "message") != o.blocked_message) {
    log_warning("The apiserver refused a write of a child object; retrying with backoff.",
                fields(job.meta, {{"reason", o.blocked_reason}, {"error", o.blocked_message}}));
    event(job.meta, "Warning", o.blocked_reason, o.blocked_message);
  }
  Status s = write_status(job.meta, o);
  if (!s.ok()) return {s, std::nullopt, phase};
  return {why, std::nullopt, "Blocked"};  // the work queue backs off before the next try
}

Status Reconciler::reconcile_pods(const JobView& job, const std::vector<Pod>& pods, Outcome* o) {
  // Kueue: held (no pods) until the Workload is admitted, then placed by its admission.
  std::optional<JobView> placed;
  if (options_.kueue) {
    placed = job;
    TLT_RETURN_IF_ERROR(reconcile_workload(job, pods, o, &*placed));
  }
  o->restarts = job.meta.status.value("restarts", 0);
  o->created = true;
  std::vector<const Pod*> live = tally(pods, o), failed;
  for (const Pod* p : live) {
    if (p->phase == "Failed") failed.push_back(p);
  }
  auto running = [&] {
    std::vector<const Pod*> out;
    for (const Pod* p : live) {
      if (p->phase != "Succeeded" && p->phase != "Failed") out.push_back(p);
    }
    return out;
  };
  // 1. Failures: delete (so the pod is recreated under the same name) and count.
  o->restarts += static_cast<int32_t>(failed.size());
  TLT_RETURN_IF_ERROR(delete_pods(job.meta, failed, "PodFailed"));
  if (o->restarts > job.backoff_limit) {
    o->terminal = "Failed";
    o->terminal_reason = "BackoffLimitExceeded";
    o->terminal_message = std::to_string(o->restarts) + " pod failures exceed spec.backoffLimit " +
                          std::to_string(job.backoff_limit) + ".";
    return delete_pods(job.meta, running(), "BackoffLimitExceeded");
  }
  // 2. Completion: every pod of the completion role succeeded.
  for (const RoleView& role : job.roles) {
    if (role.name != job.completion_role || role.replicas <= 0) continue;
    int done = 0;
    for (const Pod* p : live)
      done += p->role == role.name && p->index < role.replicas && p->phase == "Succeeded";
    if (done < role.replicas) break;
    o->terminal = "Succeeded";
    o->terminal_reason = "AllPodsSucceeded";
    o->terminal_message = "All " + std::to_string(done) + " " + role.name + " pods succeeded.";
    return delete_pods(job.meta, running(), "JobSucceeded");
  }
  // 3. Suspend, or held for Kueue: no pods at all.
  if (job.suspend || !o->queued_reason.empty()) {
    o->suspended = job.suspend;
    return delete_pods(job.meta, live, job.suspend ? "Suspended" : o->queued_reason);
  }
  // 4. Scale: surplus pods go (highest index first), missing ones are created.
  std::vector<const Pod*> surplus;
  for (const Pod* p : live) {
    bool wanted = false;
    for (const RoleView& role : job.roles) {
      wanted = wanted || (role.name == p->role && p->index >= 0 && p->index < role.replicas &&
                          p->name == pod_name(job.meta.name, role.name, p->index));
    }
    if (!wanted) surplus.push_back(p);
  }
  std::sort(surplus.begin(), surplus.end(),
            [](const Pod* a, const Pod* b) { return a->index > b->index; });
  TLT_RETURN_IF_ERROR(delete_pods(job.meta, surplus, "ScaledDown"));
  std::vector<std::pair<const RoleView*, int>> missing;
  const JobView& made = placed ? *placed : job;  // the roles the pods are made of
  for (const RoleView& role : made.roles) {
    o->desired_pods += role.replicas;
    for (int i = 0; i < role.replicas; ++i) {
      std::string name = pod_name(job.meta.name, role.name, i);
      bool exists =
          std::any_of(pods.begin(), pods.end(), [&](const Pod& p) { return p.name == name; });
      if (!exists) missing.emplace_back(&role, i);
    }
  }
  TLT_RETURN_IF_ERROR(create_pods(made, missing, o));
  report_pending(job, live, o);
  return report_pods_ready(job, *o);
}

void Reconciler::report_pending(const JobView& job, const std::vector<const Pod*>& live,
                                Outcome* o) {
  std::vector<PendingPod> pending;
  for (const Pod* p : live)
    pending.push_back(
        {p->name, p->phase, p->created, p->unscheduled_reason, p->unscheduled_message});
  PendingReport r = pods_pending(pending, clock_->now(), options_.pods_pending_timeout,
                                 job.meta.status, job.meta.generation);
  o->recheck_after = r.recheck_after;
  if (r.condition.is_null()) return;
  if (r.turned_true) {
    log_warning("Pods stay Pending.", fields(job.meta, {{"message", r.condition["message"]}}));
    event(job.meta, "Warning", kPodsPendingCondition, r.condition["message"]);
  }
  o->extra_conditions.emplace_back(kPodsPendingCondition, std::move(r.condition));
}

Status Reconciler::create_pods(const JobView& job,
                               const std::vector<std::pair<const RoleView*, int>>& missing,
                               Outcome* o) {
  if (missing.empty()) return Status::Ok();
  kube::Resource r = pod_resource(job.meta.namespace_);
  std::vector<char> created(missing.size(), 0);  // by index; each written by one call
  std::vector<Status> results = run_parallel(
      static_cast<int>(missing.size()), options_.max_parallel_creates, [&](int k) -> Status {
        const auto& [role, i] = missing[static_cast<size_t>(k)];
        bool made = false;
        StatusOr<Json> out =
            create_child(r, desired_pod(job, *role, i, options_.pod), job.meta, &made);
        if (!out.ok()) return out.status();
        cache_->written(r, *out);
        created[static_cast<size_t>(k)] = made;
        if (made) {
          log_info("Created a pod.",
                   fields(job.meta,
                          {{"pod", pod_name(job.meta.name, role->name, i)}, {"role", role->name}}));
        }
        return Status::Ok();
      });
  std::string names;
  Status first_error;
  for (size_t k = 0; k < missing.size(); ++k) {
    if (!results[k].ok()) {
      if (first_error.ok()) first_error = results[k];
      continue;
    }
    if (!created[k]) continue;  // the job's own pod, found by its name (and re-labelled)
    names += (names.empty() ? "" : ", ") +
             pod_name(job.meta.name, missing[k].first->name, missing[k].second);
  }
  if (!names.empty()) event(job.meta, "Normal", "PodsCreated", "Created pods " + names + ".");
  if (!first_error.ok()) o->created = false;
  return first_error;
}

ReconcileResult Reconciler::finished(const JobView& job, const std::vector<Pod>& pods,
                                     std::optional<Progress> progress) {
  const ObservedJob& meta = job.meta;
  std::string phase = meta.status.value("phase", "");
  Outcome o;
  o.terminal = phase;
  o.terminal_reason = phase == "Failed" ? failed_reason(meta.status) : "AllPodsSucceeded";
  o.terminal_message = condition_message(meta.status, phase);
  o.restarts = meta.status.value("restarts", 0);
  o.created = true;
  o.progress = std::move(progress);
  std::vector<const Pod*> running;
  for (const Pod* p : tally(pods, &o)) {
    if (p->phase != "Succeeded" && p->phase != "Failed") running.push_back(p);
  }
  for (const RoleView& r : job.roles) o.desired_pods += r.replicas;
  Status s = delete_pods(meta, running, phase == "Failed" ? "JobFailed" : "JobSucceeded");
  if (s.ok()) s = finish_workload(job, phase, o.terminal_message);
  if (s.ok()) s = write_status(meta, o);
  if (!s.ok()) return {s, std::nullopt, phase};
  if (!job.ttl_seconds_after_finished) return {Status::Ok(), std::nullopt, phase};
  WallTime now = clock_->now();
  WallTime end = parse_time(meta.status.value("completionTime", "")).value_or(now);
  WallTime deadline = end + seconds(*job.ttl_seconds_after_finished);
  if (now < deadline) {
    auto left = std::chrono::duration_cast<seconds>(deadline - now) + seconds(1);
    return {Status::Ok(), left, phase};
  }
  s = client_->remove(job_resource(meta.kind, meta.namespace_), meta.name);
  if (!s.ok() && s.code() != StatusCode::kNotFound) return {s, std::nullopt, phase};
  cache_->deleted(job_resource(meta.kind, meta.namespace_), meta.name);
  log_info(
      "Deleted a finished job after ttlSecondsAfterFinished.",
      fields(meta, {{"ttlSecondsAfterFinished", std::to_string(*job.ttl_seconds_after_finished)}}));
  return {Status::Ok(), std::nullopt, phase};
}

Status Reconciler::write_status(const ObservedJob& job, const Outcome& outcome) {
  Json computed = compute_status(job.kind, job.status, outcome, job.generation, clock_->now());
  if (!status_changed(job.status, computed)) return Status::Ok();
  kube::Resource r = job_resource(job.kind, job.namespace_);
  StatusOr<Json> out = client_->patch_status(r, job.name, computed);
  if (!out.ok()) return out.status();
  cache_->written(r, *out);
  std::string before = job.status.value("phase", ""), after = computed.value("phase", "");
  log_info("Updated the job's status.", fields(job, {{"phase", after}, {"was", before}}));
  // (PodsCreated said Pending; stuck() said Blocked, with the apiserver's reason)
  if (before != after && !(before.empty() && after == "Pending") && after != "Blocked") {
    std::string message = condition_message(
        computed, after == "Pending" || after == kQueuedPhase ? "Running" : after);
    event(job, after == "Failed" ? "Warning" : "Normal", after, message);
  }
  return Status::Ok();
}

void Reconciler::event(const ObservedJob& job, const std::string& type, const std::string& reason,
                       const std::string& message) {
  events_->record(job, type, reason, message);
}

}  // namespace tlt::controller
