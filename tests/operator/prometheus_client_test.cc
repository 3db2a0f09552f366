// The Prometheus client: parsing /api/v1/query answers (a vector; API errors; garbage of every
// kind becomes a Status, never an exception), and the real cpprestsdk client against a port where
// nothing listens and one that accepts but never answers.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include <gtest/gtest.h>

#include "operator/rebalancer/prometheus_client.h"

namespace tlt::rebalancer {
namespace {

constexpr const char* kWhat = "query http://p:9090";

TEST(PrometheusParse, Vector_SamplesWithLabelsAndValues) {
  auto r = parse_query_response(200, "application/json",
                                R"({"status":"success","data":{"resultType":"vector",
      "result":[{"metric":{"pod":"j-rollout-0","job":"j"},"value":[1700000000.5,"0.25"]},
                {"metric":{"pod":"j-rollout-1"},"value":[1700000000.5,"1e-3"]}]}})",
                                kWhat);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].labels.at("pod"), "j-rollout-0");
  EXPECT_EQ((*r)[0].labels.at("job"), "j");
  EXPECT_DOUBLE_EQ((*r)[0].value, 0.25);
  EXPECT_DOUBLE_EQ((*r)[1].value, 0.001);
}

TEST(PrometheusParse, EmptyResult_NoSamples) {
  auto r = parse_query_response(
      200, "application/json", R"({"status":"success","data":{"resultType":"vector","result":[]}})",
      kWhat);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST(PrometheusParse, NaNAndInf_Dropped) {
  auto r = parse_query_response(200, "application/json",
                                R"({"status":"success","data":{"resultType":"vector",
      "result":[{"metric":{"pod":"a"},"value":[1,"NaN"]},{"metric":{"pod":"b"},"value":[1,"+Inf"]},
                {"metric":{"pod":"c"},"value":[1,"0.5"]}]}})",
                                kWhat);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].labels.at("pod"), "c");
}

TEST(PrometheusParse, BadQuery400_InvalidArgumentWithErrorTypeNotText) {
  auto r = parse_query_response(
      400, "application/json",
      R"({"status":"error","errorType":"bad_data","error":"parse error at char 5"})", kWhat);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("bad_data"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("parse error"), std::string::npos) << "no body text";
  EXPECT_NE(r.status().message().find(kWhat), std::string::npos);
}

TEST(PrometheusParse, Non200_UnavailableCodeAndContentTypeOnly) {
  for (int code : {404, 500, 502, 503}) {
    auto r =
        parse_query_response(code, "text/html; charset=utf-8", "<html>Bad Gateway</html>", kWhat);
    ASSERT_FALSE(r.ok()) << code;
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << code;
    EXPECT_NE(r.status().message().find("HTTP " + std::to_string(code) + " (text/html)"),
              std::string::npos)
        << r.status().message();
    EXPECT_EQ(r.status().message().find("Bad Gateway"), std::string::npos) << "no body text";
  }
}

// An internal endpoint's answer, at a URL a job author chose: none of it may come back, whatever
// its shape, status code or content type.
TEST(PrometheusParse, SecretBodies_NeverInTheMessage) {
  const std::string secret = "s3cr3t-token-AKIA0000";
  const std::string bodies[] = {
      secret,
      "{\"status\":\"error\",\"errorType\":\"" + secret + "\",\"error\":\"" + secret + "\"}",
      "{\"status\":\"" + secret + "\"}",
      "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"" + secret +
          "\":1}]}}",
      "{\"status\":\"success\",\"data\":{\"resultType\":\"" + secret + "\"}}"};
  for (int code : {200, 302, 401, 500}) {
    for (const std::string& body : bodies) {
      auto r = parse_query_response(code, "text/plain\n" + secret, body, kWhat);
      ASSERT_FALSE(r.ok()) << code << " " << body;
      EXPECT_EQ(r.status().message().find("s3cr3t"), std::string::npos) << r.status().message();
    }
  }
}

TEST(PrometheusParse, Garbage_CorruptionNeverThrows) {
  const char* bodies[] = {
      "",
      "not json",
      "[1,2,3]",
      R"({"status":5})",
      R"({"status":"error","errorType":7,"error":null})",
      R"({"status":"success"})",
      R"({"status":"success","data":{"resultType":"matrix","result":[]}})",
      R"({"status":"success","data":{"resultType":"vector","result":{}}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[7]}})",
  };
  for (const char* body : bodies) {
    StatusOr<std::vector<Sample>> r = Status::Ok();
    EXPECT_NO_THROW(r = parse_query_response(200, "application/json", body, kWhat)) << body;
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << body;
  }
}

TEST(PrometheusParse, UrlEncode_ReservedCharacters) {
  EXPECT_EQ(url_encode("max by (pod) (m{job=\"a\"}[60s])+1"),
            "max%20by%20%28pod%29%20%28m%7Bjob%3D%22a%22%7D%5B60s%5D%29%2B1");
}

// A loopback TCP socket: listening (accepts into the backlog, never answers) or bound only.
class Socket {
 public:
  explicit Socket(bool listen_too) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t n = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
    if (listen_too) listen(fd_, 8);
  }
  ~Socket() { close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(PrometheusClient, NothingListening_Unavailable) {
  Socket bound_only(false);  // holds the port so nothing else takes it; refuses connections
  auto client = make_prometheus_client(std::chrono::milliseconds(2000));
  std::string url = "http://127.0.0.1:" + std::to_string(bound_only.port());
  auto r = client->query(url, "up");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  EXPECT_NE(r.status().message().find(url), std::string::npos);
}

TEST(PrometheusClient, NeverAnswers_DeadlineExceeded) {
  Socket silent(true);
  auto client = make_prometheus_client(std::chrono::milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  auto r = client->query("http://127.0.0.1:" + std::to_string(silent.port()), "up");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().to_string();
  EXPECT_LT(secs, 5.0);
}

TEST(PrometheusClient, MalformedURL_ErrorNotException) {
  auto client = make_prometheus_client(std::chrono::milliseconds(300));
  StatusOr<std::vector<Sample>> r = Status::Ok();
  EXPECT_NO_THROW(r = client->query("http://[not a url", "up"));
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace tlt::rebalancer
