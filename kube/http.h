// The one HTTP interface the Kubernetes client talks through, so that cpprestsdk (in
// "maintenance mode" upstream) stays behind it and unit tests can swap in a fake.
//
// Thread safety: implementations must allow concurrent calls to send() and stream().
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "api/status.h"

namespace tlt::kube {

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, PATCH, DELETE
  std::string path;            // "/apis/tlt.dev/v1alpha1/...?limit=500", from the root
  std::map<std::string, std::string> headers;  // besides Authorization, which the transport adds
  std::string body;                            // sent as is; Content-Type goes in headers
  std::chrono::seconds timeout{30};  // the whole exchange (for stream(): the whole stream)
};

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int status_code, std::string body_text,
               std::map<std::string, std::string> response_headers = {})
      : status(status_code), body(std::move(body_text)), headers(std::move(response_headers)) {}

  int status = 0;    // HTTP status code
  std::string body;  // the whole body
  // The headers the client looks at (at least Retry-After), names lower-cased: "retry-after".
  std::map<std::string, std::string> headers;
};

// A transport failure that certainly happened before any byte of the request reached the server
// (the connection was refused or could not be made, the name did not resolve) is an Unavailable
// whose message starts with kNotSent; a non-idempotent request may be retried after it. Any other
// Unavailable (a reset, a broken TLS handshake, a timeout) may have reached the server.
inline constexpr char kNotSent[] = "request not sent: ";

// Whether `status` is such a not-sent failure.
inline bool request_not_sent(const Status& status) {
  return status.code() == StatusCode::kUnavailable && status.message().rfind(kNotSent, 0) == 0;
}

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;

  // Sends one request and reads the whole response. Returns the response for any HTTP status
  // (mapping codes to Status is the client's business); Unavailable when the server could not be
  // reached (message prefixed with kNotSent when the request was never sent) or the connection
  // broke, DeadlineExceeded when `timeout` passed.
  virtual StatusOr<HttpResponse> send(const HttpRequest& request) = 0;

  // Sends one request whose response is a stream of lines (a watch): calls `on_line` for every
  // complete line of a 2xx response as it arrives, until the server ends the stream, `on_line`
  // returns false, or `timeout` passes. Returns the HTTP status with the body when it is not
  // 2xx (a 410 Gone, say), else status 200 and an empty body. Errors as send().
  virtual StatusOr<HttpResponse> stream(const HttpRequest& request,
                                        const std::function<bool(const std::string&)>& on_line) = 0;
};

}  // namespace tlt::kube
