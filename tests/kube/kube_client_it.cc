// The Kubernetes client against a real kube-apiserver with the tlt CRDs installed, started by
// kube_client_apiserver.sh, which passes its kubeconfig in TLT_TEST_KUBECONFIG (token + CA), and
// client-certificate kubeconfigs in TLT_TEST_CERT_KUBECONFIG (client-certificate-data, user
// tlt-cert-user in system:masters), TLT_TEST_CERT_FILE_KUBECONFIG (the same as file paths) and
// TLT_TEST_WRONG_CERT_KUBECONFIG (a certificate from a CA the apiserver does not trust).
// Not a unit test: without those variables every test fails, it does not skip.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "kube/client.h"
#include "kube/cpprest_transport.h"
#include "kube/kubeconfig.h"

namespace tlt::kube {
namespace {

using Json = nlohmann::json;

const Resource kRLJobs{"tlt.dev", "v1alpha1", "rljobs", "kube-it"};

const Resource kNamespaces{"", "v1", "namespaces", ""};

// The credentials of the kubeconfig named by $`variable`.
Credentials credentials(const char* variable = "TLT_TEST_KUBECONFIG") {
  const char* path = std::getenv(variable);
  EXPECT_NE(path, nullptr) << variable
                           << " unset: run me through tests/kube/kube_client_apiserver.sh";
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

// Lists namespaces and asks the apiserver who we are (SelfSubjectReview).
void expect_cert_user(const char* variable) {
  Credentials cert = credentials(variable);
  ASSERT_FALSE(cert.client_cert_pem.empty()) << variable;
  ASSERT_TRUE(cert.token.empty() && cert.token_file.empty()) << "the certificate alone";
  auto c = make_client(make_cpprest_transport(cert));
  StatusOr<ObjectList> namespaces = c->list(kNamespaces, {});
  ASSERT_TRUE(namespaces.ok()) << variable << ": " << namespaces.status().to_string();
  bool found = false;
  for (const Json& ns : namespaces->items) found = found || ns["metadata"]["name"] == "kube-it";
  EXPECT_TRUE(found) << "namespace kube-it not listed";
  StatusOr<Json> review =
      c->create(Resource{"authentication.k8s.io", "v1", "selfsubjectreviews", ""},
                {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}});
  ASSERT_TRUE(review.ok()) << review.status().to_string();
  const Json& user = (*review)["status"]["userInfo"];
  EXPECT_EQ(user.value("username", ""), "tlt-cert-user") << review->dump();
  EXPECT_NE(user["groups"].dump().find("system:masters"), std::string::npos) << user.dump();
}

TEST(KubeClientApiserver, ClientCertificateData_ListsNamespacesAsItsUser) {
  expect_cert_user("TLT_TEST_CERT_KUBECONFIG");
}

TEST(KubeClientApiserver, ClientCertificateFiles_ListsNamespacesAsItsUser) {
  expect_cert_user("TLT_TEST_CERT_FILE_KUBECONFIG");
}

TEST(KubeClientApiserver, UntrustedClientCertificate_FailedPrecondition) {
  Credentials wrong = credentials("TLT_TEST_WRONG_CERT_KUBECONFIG");
  ASSERT_FALSE(wrong.client_cert_pem.empty());
  Status s = make_client(make_cpprest_transport(wrong))->list(kNamespaces, {}).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.to_string();
  EXPECT_NE(s.message().find("401"), std::string::npos) << s.message();
}

TEST(KubeClientApiserver, UntrustedServerCertificate_Unavailable) {
  Credentials untrusted = credentials();
  untrusted.ca_pem.clear();  // the system roots do not know the test apiserver's certificate
  Status s = make_client(make_cpprest_transport(untrusted))->get(kRLJobs, "x").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
}

// A port on 127.0.0.1 that nothing listens on (bound, then closed), or 0.
int closed_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

TEST(KubeClientApiserver, ConnectionRefused_EvenCreateRetriedAsNotSent) {
  Credentials nowhere = credentials();
  int port = closed_port();
  ASSERT_NE(port, 0);
  nowhere.server = "https://127.0.0.1:" + std::to_string(port);
  ClientOptions options;
  options.initial_backoff = std::chrono::milliseconds(10);
  Status s = make_client(make_cpprest_transport(nowhere), options)
                 ->create(kRLJobs, rljob("never"))
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  EXPECT_NE(s.message().find(kNotSent), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(5 attempts)"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tlt::kube
