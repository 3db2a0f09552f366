// cpprestsdk behind HttpTransport. Every cpprestsdk exception stops here and becomes a Status.
// TLS: the kubeconfig's CA and client certificate are handed to OpenSSL from memory, never
// written to files.
#include "kube/cpprest_transport.h"

#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include <cpprest/containerstream.h>
#include <cpprest/http_client.h>

namespace tlt::kube {
namespace {

namespace http = web::http;
namespace client = web::http::client;

constexpr std::chrono::seconds kDefaultTimeout{30};

class CpprestTransport : public HttpTransport {
 public:
  explicit CpprestTransport(Credentials credentials)
      : credentials_(std::move(credentials)), shared_(new_client(kDefaultTimeout)) {}

  StatusOr<HttpResponse> send(const HttpRequest& request) override {
    try {
      StatusOr<http::http_request> msg = to_message(request);
      if (!msg.ok()) return msg.status();
      std::unique_ptr<client::http_client> own;
      client::http_client* c = shared_.get();
      if (request.timeout != kDefaultTimeout) {
        own = new_client(request.timeout);
        c = own.get();
      }
      http::http_response res = c->request(*msg).get();
      return to_response(res, res.extract_string(true).get());
    } catch (const http::http_exception& e) {
      return from_exception(request, e);
    } catch (const std::exception& e) {
      return Status::Unavailable(what(request) + ": " + e.what());
    }
  }

  StatusOr<HttpResponse> stream(const HttpRequest& request,
                                const std::function<bool(const std::string&)>& on_line) override {
    pplx::cancellation_token_source cancel;
    try {
      StatusOr<http::http_request> msg = to_message(request);
      if (!msg.ok()) return msg.status();
      std::unique_ptr<client::http_client> c = new_client(request.timeout);
      http::http_response res = c->request(*msg, cancel.get_token()).get();
      if (res.status_code() < 200 || res.status_code() >= 300) {
        return to_response(res, res.extract_string(true).get());
      }
      concurrency::streams::istream body = res.body();
      while (true) {
        concurrency::streams::container_buffer<std::string> line;
        size_t n = body.read_line(line).get();
        if (n == 0 && body.is_eof()) break;
        if (!on_line(line.collection())) {
          cancel.cancel();
          break;
        }
      }
      return HttpResponse{200, ""};
    } catch (const http::http_exception& e) {
      if (cancel.get_token().is_canceled()) return HttpResponse{200, ""};
      return from_exception(request, e);
    } catch (const std::exception& e) {
      if (cancel.get_token().is_canceled()) return HttpResponse{200, ""};
      return Status::Unavailable(what(request) + ": " + e.what());
    }
  }

 private:
  static std::string what(const HttpRequest& r) { return r.method + " " + r.path; }

  // The status, `body`, and the one header the client reads (Retry-After).
  static HttpResponse to_response(const http::http_response& res, std::string body) {
    HttpResponse out(res.status_code(), std::move(body));
    auto it = res.headers().find("Retry-After");  // cpprestsdk's header lookup ignores case
    if (it != res.headers().end()) out.headers["retry-after"] = it->second;
    return out;
  }

  // cpprestsdk's failure as http.h describes it: DeadlineExceeded for its timer, kNotSent for a
  // connection that was never made (cpprestsdk reports a refused connect as "Failed to connect"
  // with host_unreachable), Unavailable for the rest.
  static Status from_exception(const HttpRequest& request, const http::http_exception& e) {
    std::string message = std::string(e.what());
    if (e.error_code() == std::errc::timed_out) {
      return Status::DeadlineExceeded(what(request) + ": " + message + " (after " +
                                      std::to_string(request.timeout.count()) + " s)");
    }
    bool connect_failed = message.rfind("Failed to connect", 0) == 0 ||
                          message.rfind("Error resolving address", 0) == 0 ||
                          e.error_code() == std::errc::connection_refused;
    if (connect_failed) return Status::Unavailable(kNotSent + what(request) + ": " + message);
    return Status::Unavailable(what(request) + ": " + message);
  }

  std::unique_ptr<client::http_client> new_client(std::chrono::seconds timeout) const {
    client::http_client_config config;
    config.set_timeout(timeout);
    config.set_validate_certificates(!credentials_.insecure_skip_tls_verify);
    if (!credentials_.ca_pem.empty() || !credentials_.client_cert_pem.empty()) {
      // Copies: the callback runs for every new connection, on cpprestsdk's threads.
      std::string ca = credentials_.ca_pem;
      std::string cert = credentials_.client_cert_pem, key = credentials_.client_key_pem;
      config.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& ctx) {
        // Errors are ignored: load_kubeconfig() checked the PEM, and whatever still fails shows
        // as a failed handshake or a 401.
        boost::system::error_code ignored;
        if (!ca.empty()) {
          ctx.add_certificate_authority(boost::asio::buffer(ca.data(), ca.size()), ignored);
        }
        if (!cert.empty()) {
          ctx.use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()), ignored);
          ctx.use_private_key(boost::asio::buffer(key.data(), key.size()),
                              boost::asio::ssl::context::pem, ignored);
        }
      });
    }
    return std::make_unique<client::http_client>(web::uri(credentials_.server), config);
  }

  StatusOr<http::http_request> to_message(const HttpRequest& r) const {
    StatusOr<std::string> token = credentials_.bearer_token();
    if (!token.ok()) return token.status();
    http::http_request msg(http::method(r.method));
    msg.set_request_uri(web::uri(r.path));
    if (!token->empty()) msg.headers().add("Authorization", "Bearer " + *token);
    msg.headers().add("Accept", "application/json");
    std::string content_type = "application/json";
    for (const auto& [k, v] : r.headers) {
      if (k == "Content-Type") {
        content_type = v;
      } else {
        msg.headers().add(k, v);
      }
    }
    if (!r.body.empty()) msg.set_body(r.body, content_type);
    return msg;
  }

  const Credentials credentials_;
  const std::unique_ptr<client::http_client> shared_;
};

}  // namespace

std::unique_ptr<HttpTransport> make_cpprest_transport(const Credentials& credentials) {
  return std::make_unique<CpprestTransport>(credentials);
}

}  // namespace tlt::kube
