// Where the apiserver is and how to prove who we are: read from a kubeconfig file or from the
// pod's service account (in-cluster).
//
// Supported: a bearer token (inline, or a token file that is re-read for every request, as
// service-account tokens rotate), a client certificate and key (client-certificate(-data) and
// client-key(-data); files are read once, at load; the -data form wins when both are given, as in
// client-go), a CA bundle (file or inline data) or insecure-skip-tls-verify. A user may have both
// a token and a certificate (both are sent). Not supported: exec and auth-provider plugins and
// username/password -- a user with only those is refused with Unimplemented naming the field.
//
// Thread safety: plain values and stateless functions.
#pragma once

#include <string>

#include "api/status.h"

namespace tlt::kube {

struct Credentials {
  std::string server;  // "https://127.0.0.1:6443"
  std::string ca_pem;  // the CA bundle to trust, PEM; "" trusts the system roots
  bool insecure_skip_tls_verify = false;
  std::string token;       // a bearer token, or "" when token_file is set (or none)
  std::string token_file;  // read for every request; "" when token is set (or none)
  // The client certificate (PEM, the leaf first, intermediates after) and its private key (PEM,
  // unencrypted); both "" or both set. load_kubeconfig() has checked that they parse and match.
  std::string client_cert_pem;
  std::string client_key_pem;

  // The token to send now: `token`, token_file's contents without trailing whitespace, or ""
  // when the user has neither (a certificate user). Unavailable when the file cannot be read.
  StatusOr<std::string> bearer_token() const;
};

// Reads `path` and picks `context` (or the file's current-context when ""). Returns NotFound
// when the file (or a CA, certificate or key file it names) is missing; InvalidArgument naming
// the missing or malformed entry ("client-key-data: not base64", a certificate without its key,
// PEM that does not parse, a key that does not match the certificate, a user with no
// credentials); Unimplemented naming the field for exec, auth-provider or username/password
// users. Relative file paths resolve against the file's directory, as kubectl does.
StatusOr<Credentials> load_kubeconfig(const std::string& path, const std::string& context = "");

// In-cluster: $KUBERNETES_SERVICE_HOST/PORT and the service account's token and ca.crt under
// `sa_dir` (normally /var/run/secrets/kubernetes.io/serviceaccount). FailedPrecondition when not
// running in a pod.
StatusOr<Credentials> in_cluster_credentials(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// Standard base64 (with or without padding) to bytes; InvalidArgument on other characters.
StatusOr<std::string> base64_decode(const std::string& text);

}  // namespace tlt::kube
