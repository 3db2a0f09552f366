// The Kubernetes client's protocol pieces against a scripted fake transport: paths, query
// strings, content types, paging, HTTP -> Status, watch lines; and kubeconfig parsing.
#include <deque>
#include <fstream>

#include <gtest/gtest.h>

#include "operator/kube/client.h"
#include "operator/kube/kubeconfig.h"

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

class ClientTest : public ::testing::Test {
 protected:
  ClientTest() : client_(make_client(std::make_unique<FakeTransport>(&fake_))) {}
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
  EXPECT_EQ(last().path, "/apis/tlt.dev/v1alpha1/namespaces/ns1/rljobs");
  EXPECT_EQ(Json::parse(last().body)["metadata"]["name"], "j");
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

TEST(Kubeconfig, Base64_DecodesWithAndWithoutPadding) {
  EXPECT_EQ(*base64_decode("aGVsbG8="), "hello");
  EXPECT_EQ(*base64_decode("aGVsbG8"), "hello");
  EXPECT_FALSE(base64_decode("a*b").ok());
}

}  // namespace
}  // namespace tlt::kube
