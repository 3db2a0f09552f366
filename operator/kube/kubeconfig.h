// Where the apiserver is and how to prove who we are: read from a kubeconfig file or from the
// pod's service account (in-cluster).
//
// Supported: a bearer token (inline, or a token file that is re-read for every request, as
// service-account tokens rotate), a CA bundle (file or inline data) or
// insecure-skip-tls-verify. Not yet: client certificates and exec/auth-provider plugins -- a
// kubeconfig whose user has only those is refused with Unimplemented, saying so.
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
  std::string token;       // a bearer token, or "" when token_file is set
  std::string token_file;  // read for every request; "" when token is set

  // The token to send now: `token`, or token_file's contents without trailing whitespace.
  // Unavailable when the file cannot be read.
  StatusOr<std::string> bearer_token() const;
};

// Reads `path` and picks `context` (or the file's current-context when ""). Returns NotFound
// when the file is missing, InvalidArgument naming the missing or malformed entry, Unimplemented
// for client-certificate-only or plugin users. Relative file paths resolve against the file's
// directory, as kubectl does.
StatusOr<Credentials> load_kubeconfig(const std::string& path, const std::string& context = "");

// In-cluster: $KUBERNETES_SERVICE_HOST/PORT and the service account's token and ca.crt under
// `sa_dir` (normally /var/run/secrets/kubernetes.io/serviceaccount). FailedPrecondition when not
// running in a pod.
StatusOr<Credentials> in_cluster_credentials(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// Standard base64 (with or without padding) to bytes; InvalidArgument on other characters.
StatusOr<std::string> base64_decode(const std::string& text);

}  // namespace tlt::kube
