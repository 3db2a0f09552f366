// kubeconfig and in-cluster credentials.
#include "kube/kubeconfig.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <yaml-cpp/yaml.h>

namespace tlt::kube {
namespace {

StatusOr<std::string> read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(what + " " + path + " cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

// The entry of `list` (clusters, users, contexts) named `name`, or a null node.
YAML::Node find_named(const YAML::Node& list, const std::string& name) {
  if (list && list.IsSequence()) {
    for (const YAML::Node& item : list) {
      if (item["name"] && item["name"].as<std::string>("") == name) return item;
    }
  }
  return YAML::Node();
}

std::string str(const YAML::Node& node, const char* key) {
  return node && node.IsMap() && node[key] ? node[key].as<std::string>("") : "";
}

// `data_key`'s base64 content, else the file `file_key` names, else "". Errors name the field.
StatusOr<std::string> inline_or_file(const YAML::Node& user, const char* data_key,
                                     const char* file_key, const std::string& base_dir) {
  if (!str(user, data_key).empty()) {
    StatusOr<std::string> data = base64_decode(str(user, data_key));
    if (!data.ok()) return data.status().with_context(data_key);
    return data;
  }
  if (str(user, file_key).empty()) return std::string();
  return read_file(resolve(base_dir, str(user, file_key)), file_key);
}

// Checks that `cert_pem` starts with a certificate, `key_pem` holds an unencrypted private key,
// and that they belong together; InvalidArgument naming the field otherwise.
Status check_client_certificate(const std::string& cert_pem, const std::string& key_pem) {
  using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
  auto no_passphrase = [](char*, int, int, void*) { return 0; };  // never prompt on a terminal
  Bio cert_bio(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, no_passphrase, nullptr), &X509_free);
  Bio key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr), &EVP_PKEY_free);
  bool match = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();  // OpenSSL's error queue is per thread; leave it empty for the TLS code
  if (!cert) {
    return Status::InvalidArgument(
        "client-certificate(-data) is not a PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  if (!key) {
    return Status::InvalidArgument(
        "client-key(-data) is not an unencrypted PEM private key (-----BEGIN ... PRIVATE "
        "KEY-----)");
  }
  if (!match) {
    return Status::InvalidArgument(
        "client-key(-data) is not the key of client-certificate(-data); give the matching pair");
  }
  return Status::Ok();
}

// The user's credentials into `c`: token or tokenFile, client certificate and key.
Status parse_user(const YAML::Node& user, const std::string& base_dir, Credentials* c) {
  c->token = str(user, "token");
  if (c->token.empty()) c->token_file = resolve(base_dir, str(user, "tokenFile"));
  StatusOr<std::string> cert =
      inline_or_file(user, "client-certificate-data", "client-certificate", base_dir);
  if (!cert.ok()) return cert.status();
  StatusOr<std::string> key = inline_or_file(user, "client-key-data", "client-key", base_dir);
  if (!key.ok()) return key.status();
  if (cert->empty() != key->empty()) {
    return Status::InvalidArgument(cert->empty()
                                       ? "has client-key(-data) but no client-certificate(-data)"
                                       : "has client-certificate(-data) but no client-key(-data)");
  }
  if (!cert->empty()) {
    TLT_RETURN_IF_ERROR(check_client_certificate(*cert, *key));
    c->client_cert_pem = *cert;
    c->client_key_pem = *key;
  }
  if (!c->token.empty() || !c->token_file.empty() || !c->client_cert_pem.empty()) {
    return Status::Ok();
  }
  if (user && user.IsMap() && user["exec"]) {
    return Status::Unimplemented(
        "exec (a credential plugin) is not supported; use token, tokenFile or "
        "client-certificate(-data) and client-key(-data)");
  }
  if (user && user.IsMap() && user["auth-provider"]) {
    return Status::Unimplemented(
        "auth-provider is not supported; use token, tokenFile or client-certificate(-data) and "
        "client-key(-data)");
  }
  if (!str(user, "username").empty() || !str(user, "password").empty()) {
    return Status::Unimplemented(
        "username/password (basic auth) is not supported; use token, tokenFile or "
        "client-certificate(-data) and client-key(-data)");
  }
  return Status::InvalidArgument(
      "has no credentials: set token, tokenFile or client-certificate(-data) and "
      "client-key(-data)");
}

StatusOr<Credentials> parse(const YAML::Node& root, const std::string& base_dir,
                            const std::string& wanted_context) {
  std::string context_name = wanted_context.empty() ? str(root, "current-context") : wanted_context;
  if (context_name.empty()) {
    return Status::InvalidArgument("kubeconfig has no current-context; pick a context");
  }
  YAML::Node context = find_named(root["contexts"], context_name)["context"];
  if (!context)
    return Status::InvalidArgument("kubeconfig has no context \"" + context_name + "\"");
  std::string cluster_name = str(context, "cluster"), user_name = str(context, "user");
  YAML::Node cluster = find_named(root["clusters"], cluster_name)["cluster"];
  if (!cluster)
    return Status::InvalidArgument("kubeconfig has no cluster \"" + cluster_name + "\"");
  YAML::Node user = find_named(root["users"], user_name)["user"];
  if (!user) return Status::InvalidArgument("kubeconfig has no user \"" + user_name + "\"");

  Credentials c;
  c.server = str(cluster, "server");
  if (c.server.empty())
    return Status::InvalidArgument("cluster \"" + cluster_name + "\" has no server");
  c.insecure_skip_tls_verify = str(cluster, "insecure-skip-tls-verify") == "true";
  if (!str(cluster, "certificate-authority-data").empty()) {
    StatusOr<std::string> pem = base64_decode(str(cluster, "certificate-authority-data"));
    if (!pem.ok()) return pem.status().with_context("certificate-authority-data");
    c.ca_pem = *pem;
  } else if (!str(cluster, "certificate-authority").empty()) {
    StatusOr<std::string> pem =
        read_file(resolve(base_dir, str(cluster, "certificate-authority")), "CA file");
    if (!pem.ok()) return pem.status();
    c.ca_pem = *pem;
  }
  Status s = parse_user(user, base_dir, &c);
  if (!s.ok()) return s.with_context("user \"" + user_name + "\"");
  return c;
}

}  // namespace

StatusOr<std::string> Credentials::bearer_token() const {
  if (!token.empty() || token_file.empty()) return token;
  StatusOr<std::string> t = read_file(token_file, "token file");
  if (!t.ok()) return Status::Unavailable(t.status().message());
  std::string s = *t;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

StatusOr<Credentials> load_kubeconfig(const std::string& path, const std::string& context) {
  StatusOr<std::string> text = read_file(path, "kubeconfig");
  if (!text.ok()) return text.status();
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("kubeconfig " + path + " is not YAML: " + e.what());
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  try {
    StatusOr<Credentials> c = parse(root, dir, context);
    if (!c.ok()) return c.status().with_context("kubeconfig " + path);
    return c;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("kubeconfig " + path + ": " + e.what());
  }
}

StatusOr<Credentials> in_cluster_credentials(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !port || !*host || !*port) {
    return Status::FailedPrecondition(
        "not in a pod (KUBERNETES_SERVICE_HOST/PORT unset); pass --kubeconfig");
  }
  Credentials c;
  std::string h = host;
  c.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  c.token_file = sa_dir + "/token";
  StatusOr<std::string> ca = read_file(sa_dir + "/ca.crt", "service-account CA");
  if (!ca.ok()) return ca.status();
  c.ca_pem = *ca;
  return c;
}

StatusOr<std::string> base64_decode(const std::string& text) {
  auto value = [](char ch) -> int {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned bits = 0;
  int n_bits = 0;
  for (char ch : text) {
    if (ch == '=' || ch == '\n' || ch == '\r') continue;
    int v = value(ch);
    if (v < 0) return Status::InvalidArgument("not base64: unexpected character");
    bits = (bits << 6) | static_cast<unsigned>(v);
    n_bits += 6;
    if (n_bits >= 8) {
      n_bits -= 8;
      out += static_cast<char>((bits >> n_bits) & 0xFF);
    }
  }
  return out;
}

}  // namespace tlt::kube
