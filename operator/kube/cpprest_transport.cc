// cpprestsdk behind HttpTransport. Every cpprestsdk exception stops here and becomes a Status.
#include "operator/kube/cpprest_transport.h"

#include <exception>
#include <string>

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
      return HttpResponse{res.status_code(), res.extract_string(true).get()};
    } catch (const http::http_exception& e) {
      return Status::Unavailable(what(request) + ": " + e.what());
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
        return HttpResponse{res.status_code(), res.extract_string(true).get()};
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
    } catch (const std::exception& e) {
      if (cancel.get_token().is_canceled()) return HttpResponse{200, ""};
      return Status::Unavailable(what(request) + ": " + e.what());
    }
  }

 private:
  static std::string what(const HttpRequest& r) { return r.method + " " + r.path; }

  std::unique_ptr<client::http_client> new_client(std::chrono::seconds timeout) const {
    client::http_client_config config;
    config.set_timeout(timeout);
    config.set_validate_certificates(!credentials_.insecure_skip_tls_verify);
    if (!credentials_.ca_pem.empty()) {
      std::string pem = credentials_.ca_pem;
      config.set_ssl_context_callback([pem](boost::asio::ssl::context& ctx) {
        boost::system::error_code ignored;  // a bad bundle shows as a failed handshake
        ctx.add_certificate_authority(boost::asio::buffer(pem.data(), pem.size()), ignored);
      });
    }
    return std::make_unique<client::http_client>(web::uri(credentials_.server), config);
  }

  StatusOr<http::http_request> to_message(const HttpRequest& r) const {
    StatusOr<std::string> token = credentials_.bearer_token();
    if (!token.ok()) return token.status();
    http::http_request msg(http::method(r.method));
    msg.set_request_uri(web::uri(r.path));
    msg.headers().add("Authorization", "Bearer " + *token);
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
