// The Kubernetes client against a real kube-apiserver with the tlt CRDs installed, started by
// kube_client_apiserver.sh, which passes its kubeconfig in TLT_TEST_KUBECONFIG (token + CA).
// Not a unit test: without that variable every test fails, it does not skip.
#include <cstdlib>

#include <gtest/gtest.h>

#include "operator/kube/client.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/kubeconfig.h"

namespace tlt::kube {
namespace {

using Json = nlohmann::json;

const Resource kRLJobs{"tlt.dev", "v1alpha1", "rljobs", "kube-it"};

Credentials credentials() {
  const char* path = std::getenv("TLT_TEST_KUBECONFIG");
  EXPECT_NE(path, nullptr) << "run me through tests/operator/kube_client_apiserver.sh";
  StatusOr<Credentials> c = load_kubeconfig(path ? path : "/nonexistent");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : Credentials{};
}

std::unique_ptr<KubeClient> client() {
  return make_client(make_cpprest_transport(credentials()));
}

Json rljob(const std::string& name, const Json& spec = Json::object()) {
  return {{"apiVersion", "tlt.dev/v1alpha1"},
          {"kind", "RLJob"},
          {"metadata", {{"name", name}, {"labels", {{"suite", "kube-it"}}}}},
          {"spec", spec}};
}

TEST(KubeClientApiserver, CreateGetApplyStatusListWatchDelete) {
  auto c = client();
  StatusOr<Json> created = c->create(kRLJobs, rljob("one"));
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  EXPECT_EQ((*created)["spec"]["roles"]["rollout"]["replicas"], 2) << "the CRD's default";
  std::string uid = (*created)["metadata"]["uid"];
  EXPECT_EQ(c->create(kRLJobs, rljob("one")).status().code(), StatusCode::kAlreadyExists);

  StatusOr<Json> got = c->get(kRLJobs, "one");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ((*got)["metadata"]["uid"], uid);

  // Server-side apply as the operator's field manager.
  StatusOr<Json> applied =
      c->apply(kRLJobs, rljob("one", {{"roles", {{"rollout", {{"replicas", 4}}}}}}), "tlt-it");
  ASSERT_TRUE(applied.ok()) << applied.status().to_string();
  EXPECT_EQ((*applied)["spec"]["roles"]["rollout"]["replicas"], 4);
  bool managed = false;
  for (const Json& m : (*applied)["metadata"]["managedFields"]) {
    managed = managed || (m["manager"] == "tlt-it" && m["operation"] == "Apply");
  }
  EXPECT_TRUE(managed) << (*applied)["metadata"]["managedFields"].dump();
  // An apply the CRD's CEL rules refuse: the apiserver's message comes back.
  Status refused =
      c->apply(kRLJobs, rljob("one", {{"roles", {{"trainer", {{"replicas", 0}}}}}}), "tlt-it")
          .status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.to_string();
  EXPECT_NE(refused.message().find("spec.roles.trainer.replicas"), std::string::npos)
      << refused.message();

  // Status subresource: written without touching spec (generation stays).
  int64_t generation = (*applied)["metadata"]["generation"];
  StatusOr<Json> with_status = c->patch_status(kRLJobs, "one", {{"phase", "Running"}, {"step", 2}});
  ASSERT_TRUE(with_status.ok()) << with_status.status().to_string();
  EXPECT_EQ((*with_status)["status"]["phase"], "Running");
  EXPECT_EQ((*with_status)["metadata"]["generation"], generation);

  // List in pages of one.
  ASSERT_TRUE(c->create(kRLJobs, rljob("two")).ok());
  ASSERT_TRUE(c->create(kRLJobs, rljob("three")).ok());
  StatusOr<ObjectList> listed = c->list(kRLJobs, {"suite=kube-it", "", 1});
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  EXPECT_EQ(listed->items.size(), 3u);
  ASSERT_FALSE(listed->resource_version.empty());

  // Watch from the list's version: the next change arrives as an event.
  ASSERT_TRUE(c->patch_status(kRLJobs, "two", {{"phase", "Pending"}}).ok());
  std::vector<std::string> events;
  Status watched = c->watch(
      kRLJobs, {listed->resource_version, "suite=kube-it", 10, true}, [&](const WatchEvent& e) {
        if (e.type == "BOOKMARK") return true;
        events.push_back(e.type + " " + e.object["metadata"].value("name", ""));
        return false;  // one is enough
      });
  EXPECT_TRUE(watched.ok()) << watched.to_string();
  EXPECT_EQ(events, (std::vector<std::string>{"MODIFIED two"}));

  for (const char* name : {"one", "two", "three"}) {
    Status s = c->remove(kRLJobs, name);
    EXPECT_TRUE(s.ok()) << name << ": " << s.to_string();
  }
  EXPECT_EQ(c->get(kRLJobs, "one").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->remove(kRLJobs, "one").code(), StatusCode::kNotFound);
}

TEST(KubeClientApiserver, WrongToken_FailedPrecondition) {
  Credentials bad = credentials();
  bad.token = "not-the-token";
  Status s = make_client(make_cpprest_transport(bad))->get(kRLJobs, "x").status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.to_string();
  EXPECT_NE(s.message().find("401"), std::string::npos) << s.message();
}

TEST(KubeClientApiserver, UntrustedServerCertificate_Unavailable) {
  Credentials untrusted = credentials();
  untrusted.ca_pem.clear();  // the system roots do not know the test apiserver's certificate
  Status s = make_client(make_cpprest_transport(untrusted))->get(kRLJobs, "x").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
}

}  // namespace
}  // namespace tlt::kube
