// kubeconfig and in-cluster credentials.
#include "operator/kube/kubeconfig.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

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
  c.token = str(user, "token");
  if (c.token.empty()) c.token_file = resolve(base_dir, str(user, "tokenFile"));
  if (c.token.empty() && c.token_file.empty()) {
    return Status::Unimplemented("user \"" + user_name +
                                 "\" has no token or tokenFile; client certificates and auth "
                                 "plugins are not supported yet: use a token");
  }
  return c;
}

}  // namespace

StatusOr<std::string> Credentials::bearer_token() const {
  if (!token.empty()) return token;
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
