// The Kubernetes client's protocol pieces against a scripted fake transport: paths, query
// strings, content types, paging, HTTP -> Status, watch lines; and kubeconfig parsing (tokens,
// CA, client certificates).
#include <deque>
#include <fstream>

#include <gtest/gtest.h>

#include "kube/client.h"
#include "kube/kubeconfig.h"

namespace tlt::kube {
namespace {

using Json = nlohmann::json;

// Records every request and answers from a script, in order.
class FakeTransport : public HttpTransport {
 public:
  struct Shared {
    std::vector<HttpRequest> requests;
    std::deque<HttpResponse> responses;
    std::vector<std::string> stream_lines;  // for stream()
  };
  explicit FakeTransport(Shared* shared) : s_(shared) {}
  StatusOr<HttpResponse> send(const HttpRequest& r) override {
    s_->requests.push_back(r);
    if (s_->responses.empty()) return Status::Unavailable("connection refused");
    HttpResponse res = s_->responses.front();
    s_->responses.pop_front();
    return res;
  }
  StatusOr<HttpResponse> stream(const HttpRequest& r,
                                const std::function<bool(const std::string&)>& on_line) override {
    s_->requests.push_back(r);
    for (const std::string& line : s_->stream_lines) {
      if (!on_line(line)) break;
    }
    return HttpResponse{200, ""};
  }

 private:
  Shared* s_;
};

// The protocol without retries or rate limit (kube_retry_test.cc covers those).
ClientOptions protocol_only() {
  ClientOptions o;
  o.max_retries = 0;
  o.qps = 0;
  return o;
}

class ClientTest : public ::testing::Test {
 protected:
  ClientTest() : client_(make_client(std::make_unique<FakeTransport>(&fake_), protocol_only())) {}
  void respond(int code, const Json& body) { fake_.responses.push_back({code, body.dump()}); }
  const HttpRequest& last() const { return fake_.requests.back(); }

  FakeTransport::Shared fake_;
  std::unique_ptr<KubeClient> client_;
  const Resource rljobs_{"tlt.dev", "v1alpha1", "rljobs", "ns1"};
};

TEST(Resource, Paths_CoreAndGroupAndClusterWide) {
  EXPECT_EQ((Resource{"", "v1", "pods", "a"}).object_path("p"), "/api/v1/namespaces/a/pods/p");
  EXPECT_EQ((Resource{"tlt.dev", "v1alpha1", "rljobs", ""}).collection_path(),
            "/apis/tlt.dev/v1alpha1/rljobs");
}

TEST_F(ClientTest, Get_Found_ReturnsObject) {
  respond(200, {{"metadata", {{"name", "j"}}}});
  StatusOr<Json> j = client_->get(rljobs_, "j");
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ((*j)["metadata"]["name"], "j");
  EXPECT_EQ(last().method, "GET");
  EXPECT_EQ(last().path, "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs/j");
}

TEST_F(ClientTest, Get_Missing_NotFoundWithServerMessage) {
  respond(404, {{"kind", "Status"}, {"reason", "NotFound"}, {"message", "rljobs \"j\" not found"}});
  StatusOr<Json> j = client_->get(rljobs_, "j");
  EXPECT_EQ(j.status().code(), StatusCode::kNotFound);
  EXPECT_NE(j.status().message().find("rljobs \"j\" not found"), std::string::npos);
}

TEST_F(ClientTest, List_TwoPages_FollowsContinueAndKeepsLastResourceVersion) {
  respond(200, {{"metadata", {{"continue", "tok/1"}, {"resourceVersion", "5"}}},
                {"items", {{{"metadata", {{"name", "a"}}}}}}});
  respond(200,
          {{"metadata", {{"resourceVersion", "7"}}}, {"items", {{{"metadata", {{"name", "b"}}}}}}});
  StatusOr<ObjectList> l = client_->list(rljobs_, {"app=x,role!=y", "", 1});
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  ASSERT_EQ(l->items.size(), 2u);
  EXPECT_EQ(l->items[1]["metadata"]["name"], "b");
  EXPECT_EQ(l->resource_version, "7");
  ASSERT_EQ(fake_.requests.size(), 2u);
  EXPECT_EQ(
      fake_.requests[0].path,
      "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs?labelSelector=app%3Dx%2Crole%21%3Dy&limit=1");
  EXPECT_EQ(
      fake_.requests[1].path,
      "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs?labelSelector=app%3Dx%2Crole%21%3Dy&limit=1"
      "&continue=tok%2F1");
}

TEST_F(ClientTest, List_ContinueExpired_AbortedSaysListAgain) {
  respond(200, {{"metadata", {{"continue", "old"}}}, {"items", Json::array()}});
  respond(410, {{"reason", "Expired"}, {"message", "continue token too old"}});
  StatusOr<ObjectList> l = client_->list(rljobs_, {});
  EXPECT_EQ(l.status().code(), StatusCode::kAborted);
  EXPECT_NE(l.status().message().find("410 Gone"), std::string::npos);
}

TEST_F(ClientTest, Create_Taken_AlreadyExists) {
  respond(409, {{"reason", "AlreadyExists"}, {"message", "exists"}});
  StatusOr<Json> j = client_->create(rljobs_, {{"metadata", {{"name", "j"}}}});
  EXPECT_EQ(j.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(last().method, "POST");
  EXPECT_EQ(last().path,
            "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs"
            "?fieldManager=tlt-operator&fieldValidation=Strict");
  EXPECT_EQ(Json::parse(last().body)["metadata"]["name"], "j");
  EXPECT_EQ(api_reason(j.status()), "AlreadyExists");
}

TEST_F(ClientTest, Refusals_ReasonKeptInMessageAndReadBack) {
  respond(403,
          {{"reason", "Forbidden"}, {"message", "pods \"p\" is forbidden: violates PodSecurity"}});
  StatusOr<Json> j = client_->create(rljobs_, {{"metadata", {{"name", "p"}}}});
  EXPECT_EQ(j.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(j.status().message().find("HTTP 403 Forbidden: pods \"p\" is forbidden"),
            std::string::npos)
      << j.status().message();
  EXPECT_EQ(api_reason(j.status()), "Forbidden");
  respond(422, {{"message", "no reason given"}});  // a standard one from the code
  j = client_->create(rljobs_, {{"metadata", {{"name", "p"}}}});
  EXPECT_EQ(api_reason(j.status()), "Invalid");
  respond(413, {{"reason", "not a reason word"}, {"message", "too big"}});
  j = client_->create(rljobs_, {{"metadata", {{"name", "p"}}}});
  EXPECT_EQ(api_reason(j.status()), "RequestEntityTooLarge");
  EXPECT_EQ(api_reason(Status::AlreadyExists("made here, no HTTP")), "AlreadyExists");
  EXPECT_EQ(api_reason(Status::Ok()), "");
}

TEST_F(ClientTest, Apply_UsesApplyPatchWithManagerAndForce) {
  respond(200, {{"metadata", {{"name", "j"}}}});
  ASSERT_TRUE(client_->apply(rljobs_, {{"metadata", {{"name", "j"}}}}, "tlt-operator").ok());
  EXPECT_EQ(last().method, "PATCH");
  EXPECT_EQ(last().path,
            "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs/j?fieldManager=tlt-operator&force=true");
  EXPECT_EQ(last().headers.at("Content-Type"), "application/apply-patch+yaml");
  EXPECT_EQ(client_->apply(rljobs_, Json::object(), "m").status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, PatchStatus_MergePatchOnStatusSubresource) {
  respond(200, {{"metadata", {{"name", "j"}}}});
  ASSERT_TRUE(client_->patch_status(rljobs_, "j", {{"phase", "Running"}}).ok());
  EXPECT_EQ(last().path, "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs/j/status");
  EXPECT_EQ(last().headers.at("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(Json::parse(last().body), (Json{{"status", {{"phase", "Running"}}}}));
}

TEST_F(ClientTest, Patch_MergePatchOnObjectConflictIsAborted) {
  respond(200, {{"metadata", {{"name", "j"}}}});
  Json patch = {{"metadata", {{"finalizers", {"tlt.dev/cleanup"}}, {"resourceVersion", "7"}}}};
  ASSERT_TRUE(client_->patch(rljobs_, "j", patch).ok());
  EXPECT_EQ(last().method, "PATCH");
  EXPECT_EQ(last().path, "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs/j");
  EXPECT_EQ(last().headers.at("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(Json::parse(last().body), patch);
  respond(
      409,
      {{"kind", "Status"}, {"reason", "Conflict"}, {"message", "the object has been modified"}});
  EXPECT_EQ(client_->patch(rljobs_, "j", patch).status().code(), StatusCode::kAborted);
}

TEST_F(ClientTest, Remove_BackgroundPropagation) {
  respond(200, {{"kind", "Status"}, {"status", "Success"}});
  ASSERT_TRUE(client_->remove(rljobs_, "j").ok());
  EXPECT_EQ(last().method, "DELETE");
  EXPECT_EQ(Json::parse(last().body)["propagationPolicy"], "Background");
}

TEST_F(ClientTest, Errors_MapLikeClientGo) {
  struct Case {
    int code;
    const char* reason;
    StatusCode want;
  };
  for (const Case& c : {Case{422, "Invalid", StatusCode::kInvalidArgument},
                        Case{400, "BadRequest", StatusCode::kInvalidArgument},
                        Case{403, "Forbidden", StatusCode::kFailedPrecondition},
                        Case{409, "Conflict", StatusCode::kAborted},
                        Case{429, "TooManyRequests", StatusCode::kUnavailable},
                        Case{503, "ServiceUnavailable", StatusCode::kUnavailable},
                        Case{418, "Teapot", StatusCode::kInternal}}) {
    respond(c.code, {{"reason", c.reason}, {"message", "m"}});
    EXPECT_EQ(client_->get(rljobs_, "j").status().code(), c.want) << c.code;
  }
  // No response at all: the transport's Unavailable, with what was being done.
  Status s = client_->get(rljobs_, "j").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("get rljobs/j"), std::string::npos) << s.message();
}

TEST_F(ClientTest, Watch_EventsUntilCallbackStops) {
  fake_.stream_lines = {
      R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"8"}}})", "",
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})",
      R"({"type":"DELETED","object":{"metadata":{"name":"a"}}})"};
  std::vector<std::string> seen;
  Status s = client_->watch(rljobs_, {"7", "", 60, true}, [&](const WatchEvent& e) {
    seen.push_back(e.type);
    return e.type != "BOOKMARK";
  });
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED", "BOOKMARK"}));
  EXPECT_EQ(last().path,
            "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs?watch=1&resourceVersion=7"
            "&timeoutSeconds=60&allowWatchBookmarks=true");
}

TEST_F(ClientTest, Watch_GoneInStream_AbortedSaysListAgain) {
  fake_.stream_lines = {
      R"j({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (50)"}})j"};
  Status s = client_->watch(rljobs_, {"1", "", 60, true}, [](const WatchEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("410 Gone"), std::string::npos) << s.message();
}

TEST(Kubeconfig, TokenAndInlineCa_Parsed) {
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/kubeconfig-test.yaml";
  std::ofstream(path) << R"(apiVersion: v1
kind: Config
current-context: a
contexts:
- {name: a, context: {cluster: c, user: u}}
- {name: b, context: {cluster: c, user: file-user}}
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: "LS0tLS1CRUdJTg=="}
users:
- {name: u, user: {token: abc}}
- {name: file-user, user: {tokenFile: tok.txt}}
- {name: cert-user, user: {client-certificate: c.crt}}
)";
  std::ofstream(dir + "/tok.txt") << "from-file\n";
  StatusOr<Credentials> c = load_kubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "-----BEGIN");
  EXPECT_EQ(*c->bearer_token(), "abc");
  StatusOr<Credentials> b = load_kubeconfig(path, "b");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(*b->bearer_token(), "from-file");  // resolved next to the kubeconfig, re-read
  std::ofstream(dir + "/tok.txt") << "rotated\n";
  EXPECT_EQ(*b->bearer_token(), "rotated");
  EXPECT_EQ(load_kubeconfig(path, "nope").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load_kubeconfig(dir + "/missing.yaml").status().code(), StatusCode::kNotFound);
}

// A self-signed EC certificate (CN tlt-unit-test, valid until 2126), its key, and another key.
constexpr char kCertPem[] = R"(-----BEGIN CERTIFICATE-----
MIIBuTCCAV+gAwIBAgIUOGvSuSUoaMpPOhGIQfq4TFkamuAwCgYIKoZIzj0EAwIw
MTEXMBUGA1UECgwOc3lzdGVtOm1hc3RlcnMxFjAUBgNVBAMMDXRsdC11bml0LXRl
c3QwIBcNMjYxMjAyMjIxMTMxWhgPMjEyNjExMDgyMjExMzFaMDExFzAVBgNVBAoM
DnN5c3RlbTptYXN0ZXJzMRYwFAYDVQQDDA10bHQtdW5pdC10ZXN0MFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAERVuKq25H8ojq4iVTrHvhvwhC1CRJ413pb/yV0GhK
PqYZM6aXad5f+4W3ZWLWxaDobtM6NSoLWbaXC3UdLt2kb6NTMFEwHQYDVR0OBBYE
FEp3jA9wRO10aUEwaf5+t+6N4uZsMB8GA1UdIwQYMBaAFEp3jA9wRO10aUEwaf5+
t+6N4uZsMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgLkrOSKCH
7cq6eL5ysbQBAiqK2gebCNHCcycJucjXMD4CIQDWbP/N/srcxEP5Bos7U5Z1l15H
QEYWpfQnbNL0/j4xVw==
-----END CERTIFICATE-----
)";
constexpr char kKeyPem[] = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgK4r7ETl0X7icnIz0
dDyDxta/dL35uw1ids38bD2iM7ehRANCAARFW4qrbkfyiOriJVOse+G/CELUJEnj
Xelv/JXQaEo+phkzppdp3l/7hbdlYtbFoOhu0zo1KgtZtpcLdR0u3aRv
-----END PRIVATE KEY-----
)";
constexpr char kOtherKeyPem[] = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPmbYc79xp+rw7rpd
PiDuopWkjjDPdXsZt9r2rtCbN8qhRANCAATeGUfS6WByQIyT/+1BWKby33zOt4V/
sVewtTx/FinAi15LRvf/lzVY0BqCMkUzqx/SYjbqQ6J861a7/itMk9CC
-----END PRIVATE KEY-----
)";

std::string base64(const std::string& bytes) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

// Writes a kubeconfig whose one user is `user_yaml` (a flow mapping) into a fresh directory and
// loads it.
StatusOr<Credentials> load_user(const std::string& name, const std::string& user_yaml) {
  std::string path = ::testing::TempDir() + "/kubeconfig-" + name + ".yaml";
  std::ofstream(path) << "current-context: a\n"
                         "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                         "clusters: [{name: c, cluster: {server: \"https://127.0.0.1:6443\"}}]\n"
                         "users: [{name: u, user: "
                      << user_yaml << "}]\n";
  return load_kubeconfig(path);
}

TEST(Kubeconfig, ClientCertificateData_Parsed) {
  StatusOr<Credentials> c =
      load_user("cert-data", "{client-certificate-data: " + base64(kCertPem) +
                                 ", client-key-data: " + base64(kKeyPem) + "}");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->client_cert_pem, kCertPem);
  EXPECT_EQ(c->client_key_pem, kKeyPem);
  StatusOr<std::string> token = c->bearer_token();
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  EXPECT_EQ(*token, "") << "a certificate user sends no Authorization header";
}

TEST(Kubeconfig, ClientCertificateFiles_ResolvedNextToKubeconfigAndKeptWithToken) {
  std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/client.crt") << kCertPem;
  std::ofstream(dir + "/client.key") << kKeyPem;
  StatusOr<Credentials> c =
      load_user("cert-files", "{client-certificate: client.crt, client-key: client.key, token: t}");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->client_cert_pem, kCertPem);
  EXPECT_EQ(c->client_key_pem, kKeyPem);
  EXPECT_EQ(*c->bearer_token(), "t");
  // The data form wins over the file form, as in client-go.
  StatusOr<Credentials> both =
      load_user("cert-both", "{client-certificate: missing.crt, client-certificate-data: " +
                                 base64(kCertPem) + ", client-key: client.key}");
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->client_cert_pem, kCertPem);
  // A named file that is not there: NotFound naming the field.
  Status missing = load_user("cert-missing",
                             "{client-certificate: nope.crt, client-key: "
                             "client.key}")
                       .status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.to_string();
  EXPECT_NE(missing.message().find("client-certificate"), std::string::npos) << missing.message();
}

TEST(Kubeconfig, ClientCertificateBad_InvalidArgumentNamingTheField) {
  struct Case {
    std::string name, user, want_in_message;
  };
  std::string cert = base64(kCertPem), key = base64(kKeyPem);
  for (const Case& c : {
           Case{"b64-key", "{client-certificate-data: " + cert + ", client-key-data: 'a*b'}",
                "client-key-data"},
           Case{"b64-cert", "{client-certificate-data: 'no!', client-key-data: " + key + "}",
                "client-certificate-data"},
           Case{"no-key", "{client-certificate-data: " + cert + "}", "no client-key"},
           Case{"no-cert", "{client-key-data: " + key + "}", "no client-certificate"},
           Case{"not-pem",
                "{client-certificate-data: " + base64("hello") + ", client-key-data: " + key + "}",
                "not a PEM certificate"},
           Case{"key-not-pem",
                "{client-certificate-data: " + cert + ", client-key-data: " + cert + "}",
                "not an unencrypted PEM private key"},
           Case{"mismatch",
                "{client-certificate-data: " + cert + ", client-key-data: " + base64(kOtherKeyPem) +
                    "}",
                "not the key of client-certificate"},
           Case{"nothing", "{}", "no credentials"},
       }) {
    Status s = load_user(c.name, c.user).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.want_in_message), std::string::npos)
        << c.name << ": " << s.message();
    EXPECT_NE(s.message().find("user \"u\""), std::string::npos) << c.name << ": " << s.message();
  }
}

TEST(Kubeconfig, PluginUsers_UnimplementedNamingTheField) {
  Status exec = load_user("exec",
                          "{exec: {apiVersion: client.authentication.k8s.io/v1, "
                          "command: aws}}")
                    .status();
  EXPECT_EQ(exec.code(), StatusCode::kUnimplemented);
  EXPECT_NE(exec.message().find("exec"), std::string::npos) << exec.message();
  Status provider = load_user("provider", "{auth-provider: {name: oidc}}").status();
  EXPECT_EQ(provider.code(), StatusCode::kUnimplemented);
  EXPECT_NE(provider.message().find("auth-provider"), std::string::npos) << provider.message();
  Status basic = load_user("basic", "{username: a, password: b}").status();
  EXPECT_EQ(basic.code(), StatusCode::kUnimplemented);
  EXPECT_NE(basic.message().find("username/password"), std::string::npos) << basic.message();
}

TEST(Kubeconfig, Base64_DecodesWithAndWithoutPadding) {
  EXPECT_EQ(*base64_decode("aGVsbG8="), "hello");
  EXPECT_EQ(*base64_decode("aGVsbG8"), "hello");
  EXPECT_FALSE(base64_decode("a*b").ok());
}

}  // namespace
}  // namespace tlt::kube
