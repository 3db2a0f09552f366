// A client of Prometheus's HTTP API, just the instant query the rebalancer needs
// (GET <base>/api/v1/query?query=...), behind an interface so unit tests can swap in a fake
// (operator/rebalancer/fake_prometheus.h) and cpprestsdk stays in one file.
//
// Errors are Status values, never exceptions:
//   Unavailable        Prometheus could not be reached, the connection broke, or it answered
//                      with a non-200 status that is not a 4xx API error;
//   DeadlineExceeded   no answer within the client's timeout;
//   InvalidArgument    a 4xx API error (bad_data: the query is malformed), with its errorType;
//   Corruption         a 200 whose body is not the API's JSON, has `status` other than
//                      "success", a resultType other than "vector", or an unreadable sample.
// Every message starts with what was asked, the HTTP status and the content type ("query
// http://prom:9090: HTTP 502 (text/html): not an answer of Prometheus's query API"), then a
// fixed sentence. No message ever holds any part of the response body (the URL may be one a
// job author chose; what an internal endpoint answers must not reach status, Events or logs):
// of an API error only a known errorType word (bad_data, timeout, ...; else "unknown").
//
// Thread safety: implementations are safe for concurrent use.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::rebalancer {

// One element of an instant vector: its labels and value. Samples whose value is NaN or
// infinite are dropped by the parser (they carry no utilisation).
struct Sample {
  std::map<std::string, std::string> labels;  // {pod: "x-rollout-0", job: "x"}
  double value = 0.0;
};

class PrometheusClient {
 public:
  virtual ~PrometheusClient() = default;
  // Evaluates `promql` at the current time on the Prometheus at `base_url` ("http://host:9090",
  // a path prefix allowed). Returns the vector's samples (empty when no series matched), or an
  // error as described at the top.
  virtual StatusOr<std::vector<Sample>> query(const std::string& base_url,
                                              const std::string& promql) = 0;
};

// The real client on cpprestsdk; each query may take at most `timeout`.
std::unique_ptr<PrometheusClient> make_prometheus_client(std::chrono::milliseconds timeout);

// Maps one HTTP response of /api/v1/query to samples or an error (the rules at the top).
// `what` prefixes messages. Pure; exposed for tests.
StatusOr<std::vector<Sample>> parse_query_response(int http_status, const std::string& content_type,
                                                   const std::string& body,
                                                   const std::string& what);

// Percent-encodes everything but RFC 3986 unreserved characters (for a query parameter).
std::string url_encode(const std::string& text);

}  // namespace tlt::rebalancer
