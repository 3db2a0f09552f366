// Lease leader election: get, then create or patch with a resourceVersion precondition.
#include "operator/controller/leader.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>

#include "operator/controller/log.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

kube::Resource leases(const std::string& ns) {
  return {"coordination.k8s.io", "v1", "leases", ns};
}

}  // namespace

LeaderElector::LeaderElector(kube::KubeClient* client, const Clock* clock, LeaderOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

std::string LeaderElector::micro_time(WallTime t) {
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
  std::string s = format_time(t);  // ...SSZ
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06lld", static_cast<long long>(micros));
  return s.substr(0, s.size() - 1) + frac + "Z";
}

Json LeaderElector::lease_spec(const Json& old, WallTime now) const {
  std::string holder = old.value("holderIdentity", "");
  Json spec = {{"holderIdentity", options_.identity},
               {"leaseDurationSeconds", options_.lease_duration.count()},
               {"renewTime", micro_time(now)},
               {"acquireTime", old.value("acquireTime", micro_time(now))},
               {"leaseTransitions", old.value("leaseTransitions", 0)}};
  if (holder != options_.identity) {
    spec["acquireTime"] = micro_time(now);
    if (!holder.empty() || old.contains("leaseTransitions"))
      spec["leaseTransitions"] = old.value("leaseTransitions", 0) + 1;
  }
  return spec;
}

StatusOr<bool> LeaderElector::try_acquire_or_renew() {
  kube::Resource r = leases(options_.namespace_);
  WallTime now = clock_->now();
  StatusOr<Json> lease = client_->get(r, options_.name);
  if (lease.status().code() == StatusCode::kNotFound) {
    Json object = {{"apiVersion", "coordination.k8s.io/v1"},
                   {"kind", "Lease"},
                   {"metadata", {{"name", options_.name}, {"namespace", options_.namespace_}}},
                   {"spec", lease_spec(Json::object(), now)}};
    StatusOr<Json> created = client_->create(r, object);
    if (!created.ok()) return created.status();
    observed_spec_ = (*created)["spec"];
    observed_at_ = now;
    return true;
  }
  if (!lease.ok()) return lease.status();
  Json spec = lease->value("spec", Json::object());
  if (spec != observed_spec_) {
    observed_spec_ = spec;
    observed_at_ = now;
  }
  std::string holder = spec.value("holderIdentity", "");
  auto duration = std::chrono::seconds(
      spec.value("leaseDurationSeconds", static_cast<int64_t>(options_.lease_duration.count())));
  if (!holder.empty() && holder != options_.identity && now < observed_at_ + duration) return false;
  Json patch = {{"metadata", {{"resourceVersion", (*lease)["metadata"]["resourceVersion"]}}},
                {"spec", lease_spec(spec, now)}};
  StatusOr<Json> out = client_->patch(r, options_.name, patch);
  if (!out.ok()) return out.status();
  if (holder != options_.identity) {
    log_info("Took over the leader Lease.", {{"lease", options_.namespace_ + "/" + options_.name},
                                             {"identity", options_.identity},
                                             {"previous", holder.empty() ? "(none)" : holder}});
  }
  observed_spec_ = (*out)["spec"];
  observed_at_ = now;
  return true;
}

bool LeaderElector::acquire(const std::atomic<bool>& stop) {
  bool said = false;
  while (!stop) {
    StatusOr<bool> leading = try_acquire_or_renew();
    if (leading.ok() && *leading) {
      log_info(
          "Leading: this replica holds the Lease.",
          {{"lease", options_.namespace_ + "/" + options_.name}, {"identity", options_.identity}});
      return true;
    }
    if (!leading.ok()) {
      log_error("Could not acquire the leader Lease; retrying.",
                {{"error", leading.status().to_string()}});
    } else if (!said) {
      log_info("Waiting: another replica holds the leader Lease.",
               {{"lease", options_.namespace_ + "/" + options_.name},
                {"holder", observed_spec_.value("holderIdentity", "")}});
      said = true;
    }
    std::this_thread::sleep_for(options_.retry_period);
  }
  return false;
}

bool LeaderElector::hold(const std::atomic<bool>& stop) {
  // Each renewal runs on its own thread, so that a request a network partition holds up (the
  // transport may wait far longer than the lease) cannot keep this replica leading past its
  // renew deadline: the deadline is kept here, on the steady clock, whatever the request does.
  struct Call {
    std::mutex mu;
    std::condition_variable done_cv;
    bool done = false;                     // guarded by mu
    StatusOr<bool> result = Status::Ok();  // guarded by mu
  };
  using Steady = std::chrono::steady_clock;
  Steady::time_point deadline = Steady::now() + options_.renew_deadline;
  while (!stop) {
    std::this_thread::sleep_for(
        std::min<Steady::duration>(options_.retry_period, deadline - Steady::now()));
    if (stop) break;
    auto call = std::make_shared<Call>();
    std::thread([this, call] {
      StatusOr<bool> r = try_acquire_or_renew();
      std::lock_guard<std::mutex> lock(call->mu);
      call->result = std::move(r);
      call->done = true;
      call->done_cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(call->mu);
    if (!call->done_cv.wait_until(lock, deadline, [&] { return call->done; })) {
      // The thread is left to its request; nothing else touches this elector again.
      log_error("Could not renew the leader Lease within the renew deadline; stepping down.",
                {{"renewDeadlineSeconds", std::to_string(options_.renew_deadline.count())},
                 {"error", "the renewal has not returned"}});
      return false;
    }
    StatusOr<bool> leading = call->result;
    if (leading.ok() && *leading) {
      deadline = Steady::now() + options_.renew_deadline;
      continue;
    }
    if (leading.ok()) {
      log_error("Lost the leader Lease to another replica.",
                {{"holder", observed_spec_.value("holderIdentity", "")}});
      return false;
    }
    if (Steady::now() >= deadline) {
      log_error("Could not renew the leader Lease within the renew deadline; stepping down.",
                {{"error", leading.status().to_string()}});
      return false;
    }
  }
  release();
  return true;
}

void LeaderElector::release() {
  kube::Resource r = leases(options_.namespace_);
  StatusOr<Json> lease = client_->get(r, options_.name);
  if (!lease.ok() || (*lease)["spec"].value("holderIdentity", "") != options_.identity) return;
  Json patch = {{"metadata", {{"resourceVersion", (*lease)["metadata"]["resourceVersion"]}}},
                {"spec", {{"holderIdentity", nullptr}}}};
  StatusOr<Json> out = client_->patch(r, options_.name, patch);
  log_info(out.ok() ? "Released the leader Lease." : "Could not release the leader Lease.",
           {{"lease", options_.namespace_ + "/" + options_.name}});
}

}  // namespace tlt::controller
