// The informer cache: object stores (resourceVersion ordering, write-through, deletion marks, the
// job index, trimming), an informer's list + watch + re-list against a scripted client, and the
// background Event recorder.
#include <deque>
#include <thread>

#include <gtest/gtest.h>

#include "kube/fake_client.h"
#include "operator/controller/cache.h"
#include "operator/controller/desired.h"
#include "operator/controller/events.h"
#include "operator/controller/informer.h"
#include "operator/controller/job.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

Json pod(const std::string& name, const std::string& rv, const std::string& job = "j",
         const std::string& ns = "ns") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"uid", "uid-" + name},
            {"resourceVersion", rv},
            {"labels", {{kJobLabel, job}}}}},
          {"status", {{"phase", "Running"}}}};
}

Json rl_job(const std::string& name, const std::string& uid, const std::string& ns = "ns") {
  return {
      {"apiVersion", "tlt.dev/v1alpha1"},
      {"kind", "RLJob"},
      {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}, {"resourceVersion", "1"}}}};
}

// `object` with a controller ownerReference to the RLJob `job` of `uid`, and the labels the
// operator sets.
Json owned(Json object, const std::string& job, const std::string& uid) {
  object["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "tlt.dev/v1alpha1"},
                                                        {"kind", "RLJob"},
                                                        {"name", job},
                                                        {"uid", uid},
                                                        {"controller", true}}});
  object["metadata"]["labels"][kManagedByLabel] = kManagedBy;
  return object;
}

std::string rv_of(const std::optional<Json>& o) {
  return o ? o->at("metadata").value("resourceVersion", "") : "(none)";
}

kube::WatchEvent event(const std::string& type, const Json& object) {
  return {type, object};
}

TEST(ObjectStore, WatchEvents_OlderNeverReplacesNewer) {
  ObjectStore store(trim_pod);
  EXPECT_FALSE(store.synced());
  store.replace({pod("a", "5")}, "5");
  EXPECT_TRUE(store.synced());
  store.apply(event("MODIFIED", pod("a", "4")));
  EXPECT_EQ(rv_of(store.get("ns", "a")), "5") << "a late event of an older version";
  store.apply(event("MODIFIED", pod("a", "6")));
  EXPECT_EQ(rv_of(store.get("ns", "a")), "6");
  store.apply(event("DELETED", pod("a", "3")));
  EXPECT_EQ(rv_of(store.get("ns", "a")), "6") << "the deletion of an older object of that name";
  store.apply(event("DELETED", pod("a", "7")));
  EXPECT_FALSE(store.get("ns", "a").has_value());
  store.apply(event("BOOKMARK", pod("b", "8")));
  EXPECT_EQ(store.size(), 0u);
}

TEST(ObjectStore, WrittenThrough_SurvivesAnOlderListUntilANewerOne) {
  ObjectStore store(trim_pod);
  store.replace({}, "3");
  store.written(pod("b", "10"));
  store.replace({}, "8");  // a list taken before the create
  EXPECT_EQ(rv_of(store.get("ns", "b")), "10");
  store.replace({pod("b", "9")}, "9");  // ...or with an older copy in it
  EXPECT_EQ(rv_of(store.get("ns", "b")), "10");
  store.apply(event("ADDED", pod("b", "10")));  // the create's own event
  EXPECT_EQ(rv_of(store.get("ns", "b")), "10");
  store.replace({}, "12");  // a list taken after it: b is gone
  EXPECT_FALSE(store.get("ns", "b").has_value());
}

TEST(ObjectStore, Deleted_MarkedUntilTheWatchSaysGone) {
  ObjectStore store(trim_pod);
  store.replace({pod("a", "5")}, "5");
  store.deleted("ns", "a");
  ASSERT_TRUE(store.get("ns", "a").has_value());
  EXPECT_TRUE(store.get("ns", "a")->at("metadata").contains("deletionTimestamp"));
  store.replace({pod("a", "5")}, "5");  // a re-list from before the delete
  EXPECT_TRUE(store.get("ns", "a")->at("metadata").contains("deletionTimestamp"))
      << "the same version does not undo the mark";
  store.apply(event("MODIFIED", pod("a", "5")));
  EXPECT_TRUE(store.get("ns", "a")->at("metadata").contains("deletionTimestamp"));
  store.apply(event("DELETED", pod("a", "6")));
  EXPECT_FALSE(store.get("ns", "a").has_value());
  store.deleted("ns", "a");  // not there: nothing to mark
  EXPECT_EQ(store.size(), 0u);
}

TEST(ObjectStore, NonIntegerVersions_NewcomerWins) {
  EXPECT_TRUE(older_version("9", "10"));
  EXPECT_FALSE(older_version("10", "9"));
  EXPECT_FALSE(older_version("abc", "10"));
  ObjectStore store(trim_object);
  store.replace({pod("a", "x2")}, "x2");
  store.apply(event("MODIFIED", pod("a", "x1")));
  EXPECT_EQ(rv_of(store.get("ns", "a")), "x1");
}

TEST(ObjectStore, ByJob_IndexFollowsLabelsAndNamespaces) {
  ObjectStore store(trim_pod);
  store.replace(
      {pod("j-0", "1"), pod("j-1", "2"), pod("k-0", "3", "k"), pod("j-0", "4", "j", "other")}, "4");
  std::vector<Json> j = store.by_job("ns", "j");
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["metadata"]["name"], "j-0");
  EXPECT_EQ(j[1]["metadata"]["name"], "j-1");
  EXPECT_EQ(store.by_job("other", "j").size(), 1u);
  store.apply(event("MODIFIED", pod("j-1", "5", "k")));  // relabelled
  EXPECT_EQ(store.by_job("ns", "j").size(), 1u);
  EXPECT_EQ(store.by_job("ns", "k").size(), 2u);
  store.apply(event("DELETED", pod("k-0", "6", "k")));
  EXPECT_EQ(store.by_job("ns", "k").size(), 1u);
  EXPECT_TRUE(store.by_job("ns", "nobody").empty());
}

TEST(ObjectStore, Trim_KeepsWhatTheReconcilerReads) {
  Json p = pod("a", "1");
  p["metadata"]["managedFields"] = Json::array({{{"manager", "tlt-operator"}}});
  p["metadata"]["annotations"] = {{kProgressAnnotation, R"({"step":3})"}, {"other", "x"}};
  p["metadata"]["labels"]["team"] = "reasoning";
  p["metadata"]["ownerReferences"] = Json::array(
      {{{"kind", "RLJob"}, {"uid", "u"}, {"controller", true}, {"blockOwnerDeletion", true}},
       {{"kind", "Other"}, {"uid", "o"}}});
  p["spec"] = {{"containers", Json::array({{{"name", "tlt"}}})}};
  p["status"]["conditions"] =
      Json::array({{{"type", "Initialized"}, {"status", "True"}},
                   {{"type", "Ready"}, {"status", "True"}, {"lastProbeTime", nullptr}}});
  Json t = trim_pod(p);
  EXPECT_FALSE(t.contains("spec"));
  EXPECT_FALSE(t["metadata"].contains("managedFields"));
  EXPECT_EQ(t["metadata"]["labels"], Json({{kJobLabel, "j"}}));
  EXPECT_EQ(t["metadata"]["annotations"], Json({{kProgressAnnotation, R"({"step":3})"}}));
  EXPECT_EQ(t["metadata"]["ownerReferences"],
            Json::array({{{"kind", "RLJob"}, {"uid", "u"}, {"controller", true}}}));
  EXPECT_EQ(t["status"], Json({{"phase", "Running"},
                               {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}));
  Json job = {{"metadata",
               {{"name", "j"},
                {"managedFields", Json::array()},
                {"annotations", {{"kubectl.kubernetes.io/last-applied-configuration", "{}"}}}}},
              {"spec", {{"suspend", false}}}};
  EXPECT_EQ(trim_object(job),
            Json({{"metadata", {{"name", "j"}}}, {"spec", {{"suspend", false}}}}));
  Json service = trim_child("services", job);
  EXPECT_EQ(service["metadata"], Json({{"name", "j"}, {"labels", Json::object()}}));
  EXPECT_EQ(service["digest"].get<std::string>().size(), 16u);
}

TEST(Cache, StoresOfTheCachedTypes_NotSyncedUntilListed) {
  Cache cache;
  EXPECT_EQ(cache.not_synced(),
            "configmaps, networkpolicies, pods, rljobs, rolebindings, roles, secrets, "
            "serviceaccounts, services, tstpretrainjobs");
  for (const char* plural : {"tstpretrainjobs", "pods", "services", "configmaps", "serviceaccounts",
                             "roles", "rolebindings", "secrets", "networkpolicies"})
    cache.store(plural)->replace({}, "1");
  EXPECT_FALSE(cache.jobs_synced());
  cache.store("rljobs")->replace({rl_job("j", "job-uid")}, "1");
  EXPECT_TRUE(cache.jobs_synced());
  EXPECT_EQ(cache.not_synced(), "");
  EXPECT_EQ(cache.store("endpoints"), nullptr);
  cache.written(pod_resource("ns"), owned(pod("a", "2"), "j", "job-uid"));
  EXPECT_TRUE(cache.get(pod_resource("ns"), "a").has_value());
  EXPECT_FALSE(cache.get(kube::Resource{"", "v1", "endpoints", "ns"}, "a").has_value());
  cache.deleted(pod_resource("ns"), "a");
  EXPECT_TRUE(cache.by_job(pod_resource("ns"), "j")[0]["metadata"].contains("deletionTimestamp"));
}

// A fake apiserver whose watches play scripted rounds of events, each ending with a status.
class ScriptedClient : public kube::FakeKubeClient {
 public:
  struct Round {
    std::vector<kube::WatchEvent> events;
    Status end;
    std::function<void()> before_end;  // e.g. writes that move the apiserver's version on
  };
  std::deque<Round> rounds;
  std::vector<std::string> watched_from;  // each watch's resourceVersion
  std::atomic<bool>* stop = nullptr;

  Status watch(const kube::Resource&, const kube::WatchOptions& options,
               const std::function<bool(const kube::WatchEvent&)>& on_event) override {
    watched_from.push_back(options.resource_version);
    if (rounds.empty()) {
      *stop = true;
      return Status::Ok();
    }
    Round r = rounds.front();
    rounds.pop_front();
    for (const kube::WatchEvent& e : r.events) {
      if (!on_event(e)) break;
    }
    if (r.before_end) r.before_end();
    return r.end;
  }
};

TEST(Cache, OwnedStores_AdmitOnlyChildrenOfKnownJobs) {
  Cache cache;
  cache.store("rljobs")->replace({rl_job("j", "job-uid")}, "1");
  ObjectStore* pods = cache.store("pods");
  Json foreign = pod("foreign", "2");  // labelled alike, no ownerReference
  Json stale_uid = owned(pod("stale", "3"), "j", "old-uid");
  Json other_ns = owned(pod("other", "4", "j", "elsewhere"), "j", "job-uid");
  Json mine = owned(pod("mine", "5"), "j", "job-uid");
  pods->replace({foreign, stale_uid, other_ns, mine}, "5");
  std::vector<Json> listed = pods->list("");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["metadata"]["name"], "mine");
  pods->apply(event("ADDED", owned(pod("late", "6"), "j", "other")));
  EXPECT_FALSE(pods->get("ns", "late"));
  // The ownerReference taken away: the object leaves the store.
  Json orphan = pod("mine", "7");
  orphan["metadata"]["labels"][kManagedByLabel] = kManagedBy;
  pods->apply(event("MODIFIED", orphan));
  EXPECT_FALSE(pods->get("ns", "mine"));
  EXPECT_EQ(pods->size(), 0u);
}

TEST(Cache, ConfigMap_StoredAsMetadataAndDigest_WhateverItsData) {
  Cache cache;
  cache.store("rljobs")->replace({rl_job("j", "job-uid")}, "1");
  Json cm = owned({{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata",
                    {{"name", "j-rl-spec"},
                     {"namespace", "ns"},
                     {"uid", "cm-uid"},
                     {"resourceVersion", "2"},
                     {"labels", {{kJobLabel, "j"}, {"team", std::string(60, 'x')}}},
                     {"annotations", {{"big", std::string(200000, 'a')}}}}},
                   {"data", {{"job.json", std::string(900 * 1024, 'd')}}}},
                  "j", "job-uid");
  cache.written(configmap_resource("ns"), cm);
  std::optional<Json> stored = cache.get(configmap_resource("ns"), "j-rl-spec");
  ASSERT_TRUE(stored);
  EXPECT_FALSE(stored->contains("data"));
  EXPECT_FALSE(stored->at("metadata").contains("annotations"));
  EXPECT_EQ(stored->at("metadata")["labels"],
            Json({{kJobLabel, "j"}, {kManagedByLabel, kManagedBy}}));
  EXPECT_LT(Json::to_msgpack(*stored).size(), 512u);
  EXPECT_EQ(stored->value("digest", ""), child_digest("configmaps", cm));
  Json edited = cm;
  edited["data"]["job.json"] = "{}";
  EXPECT_NE(child_digest("configmaps", edited), child_digest("configmaps", cm));
}

TEST(Cache, ServiceDigest_DesiredAgreesWithTheDefaultedSpec_EditsDiffer) {
  Json want = {{"spec",
                {{"clusterIP", "None"},
                 {"publishNotReadyAddresses", true},
                 {"selector", {{kJobLabel, "j"}}},
                 {"ports", {{{"name", "rendezvous"}, {"port", 29500}, {"protocol", "TCP"}}}}}}};
  Json stored = want;
  stored["spec"]["type"] = "ClusterIP";
  stored["spec"]["clusterIPs"] = {"None"};
  stored["spec"]["sessionAffinity"] = "None";
  stored["spec"]["ports"][0]["targetPort"] = 29500;
  EXPECT_EQ(child_digest("services", stored), child_digest("services", want));
  Json port = stored, selector = stored;
  port["spec"]["ports"][0]["port"] = 80;
  selector["spec"]["selector"]["app"] = "other";
  EXPECT_NE(child_digest("services", port), child_digest("services", want));
  EXPECT_NE(child_digest("services", selector), child_digest("services", want));
  EXPECT_EQ(child_digest("pods", want), "");
}

TEST(Cache, DeletedEventUnseenDeletion_RemembersAPossibleStray) {
  Cache cache;
  cache.store("rljobs")->replace({rl_job("j", "job-uid")}, "1");
  ObjectStore* pods = cache.store("pods");
  Json p = owned(pod("j-trainer-0", "2"), "j", "job-uid");
  pods->replace({p}, "2");
  // kubectl label pod j-trainer-0 tlt.dev/job-: the selecting watch says DELETED, with the
  // object as it was (labels included) and the new resourceVersion.
  Json before = p;
  before["metadata"]["resourceVersion"] = "3";
  pods->apply(event("DELETED", before));
  EXPECT_FALSE(pods->get("ns", "j-trainer-0"));
  EXPECT_EQ(pods->strays("ns", "job-uid"), std::vector<std::string>{"j-trainer-0"});
  EXPECT_TRUE(pods->strays("ns", "other-uid").empty());
  EXPECT_TRUE(pods->strays("elsewhere", "job-uid").empty());
  // Re-labelled (written through): no longer a stray.
  Json relabelled = p;
  relabelled["metadata"]["resourceVersion"] = "4";
  pods->written(relabelled);
  EXPECT_TRUE(pods->strays("ns", "job-uid").empty());
  // Deletions that were seen: the operator's own (deleted()) and a graceful one.
  pods->deleted("ns", "j-trainer-0");
  pods->apply(event("DELETED", relabelled));
  Json graceful = owned(pod("g", "5"), "j", "job-uid");
  graceful["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z";
  pods->apply(event("DELETED", graceful));
  // A child of an unknown job.
  pods->apply(event("DELETED", owned(pod("f", "6"), "j", "other-uid")));
  EXPECT_TRUE(pods->strays("ns", "job-uid").empty());
  EXPECT_TRUE(pods->strays("ns", "other-uid").empty());
  // Unlabelled in the event (an etcd-backed watch without the cache): a stray too.
  Json unlabelled = p;
  unlabelled["metadata"]["labels"].erase(kJobLabel);
  unlabelled["metadata"]["resourceVersion"] = "7";
  pods->apply(event("DELETED", unlabelled));
  EXPECT_EQ(pods->strays("ns", "job-uid").size(), 1u);
  pods->forget_stray("ns", "j-trainer-0");
  EXPECT_TRUE(pods->strays("ns", "job-uid").empty());
}

TEST(Informer, ListWatchResumeRelist_StoreUpdatedBeforeTheCallback) {
  ScriptedClient client;
  std::atomic<bool> stop{false};
  client.stop = &stop;
  kube::Resource r = pod_resource("ns");
  client.put(r, pod("a", "0"));  // stored as version 1
  Json b = pod("b", "20"), a2 = pod("a", "21");
  client.rounds.push_back({{event("ADDED", b), event("MODIFIED", a2)}, Status::Ok(), nullptr});
  client.rounds.push_back(
      {{}, Status::Aborted("watch pods: 410 Gone: too old; list again"), [&] {
         for (int i = 0; i < 30; ++i)  // the apiserver moves past version 21
           client.put(configmap_resource("ns"), {{"metadata", {{"name", "c"}}}});
       }});
  ObjectStore store(trim_pod);
  OperatorMetrics metrics;
  std::vector<std::string> seen;
  run_informer(
      &client, &store, InformerOptions{r, kJobLabel, 5},
      [&](const Json& o) {
        std::string name = o["metadata"]["name"];
        seen.push_back(name + "@" + rv_of(store.get("ns", name)));
      },
      &metrics, stop);
  EXPECT_EQ(seen, (std::vector<std::string>{"a@1", "b@20", "a@21", "a@21"}))
      << "listed, two events (each in the store before the callback), re-listed (the listed "
         "copy of a, version 1, is older than the stored one and does not replace it)";
  ASSERT_EQ(client.watched_from.size(), 3u);
  EXPECT_EQ(client.watched_from[0], "1") << "from the list's version";
  EXPECT_EQ(client.watched_from[1], "21") << "resumed from the last event";
  EXPECT_EQ(client.watched_from[2], "31") << "from the re-list's version";
  EXPECT_FALSE(store.get("ns", "b").has_value()) << "the re-list dropped what it did not have";
  EXPECT_NE(metrics.render().find("gone"), std::string::npos);
}

TEST(AsyncEventRecorder, RecordReturnsAtOnce_ShutDownDrainsTheQueue) {
  auto kube = std::make_shared<kube::FakeKubeClient>();
  FakeClock clock(std::chrono::system_clock::from_time_t(1700000000));
  AsyncEventRecorder recorder(kube, &clock, "tlt-operator", 100, 2);
  ObservedJob job;
  job.kind = "RLJob";
  job.namespace_ = "ns";
  job.name = "j";
  job.uid = "u1";
  for (int i = 0; i < 5; ++i) recorder.record(job, "Normal", "PodsCreated", "Created pods.");
  recorder.shut_down(std::chrono::seconds(10));
  EXPECT_EQ(recorder.pending(), 0u);
  std::vector<Json> events = kube->objects(event_resource("ns"));
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0]["involvedObject"]["uid"], "u1");
  EXPECT_EQ(events[0]["source"]["component"], "tlt-operator");
  EXPECT_EQ(events[0]["lastTimestamp"], "2023-11-14T22:13:20Z");
  recorder.record(job, "Normal", "Late", "After shut_down: dropped.");
  EXPECT_EQ(recorder.pending(), 0u);
  EXPECT_EQ(kube->objects(event_resource("ns")).size(), 5u);
}

}  // namespace
}  // namespace tlt::controller
