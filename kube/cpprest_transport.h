// HttpTransport on cpprestsdk: HTTPS to one apiserver with a bearer token and/or a client
// certificate, and a CA bundle.
//
// Thread safety: send() and stream() may be called concurrently (cpprestsdk's http_client is
// thread-safe; the token is re-read per request).
#pragma once

#include <memory>

#include "kube/http.h"
#include "kube/kubeconfig.h"

namespace tlt::kube {

// A transport to credentials.server. Requests with the default 30 s timeout share one client
// (and its connections); other timeouts (watches) get a client of their own. Sends
// "Authorization: Bearer" only when credentials.bearer_token() is not empty; presents
// credentials.client_cert_pem / client_key_pem in the TLS handshake when set. The transport does
// not retry or rate-limit (the client does, see client.h).
std::unique_ptr<HttpTransport> make_cpprest_transport(const Credentials& credentials);

}  // namespace tlt::kube
