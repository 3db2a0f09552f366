#include "runtime/cluster/job_secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tlt::cluster {
namespace {

std::string to_hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) s[2 * i] = digits[p[i] >> 4], s[2 * i + 1] = digits[p[i] & 15];
  return s;
}

StatusOr<std::string> random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), int(bytes)) != 1) {
    return Status::Internal("the system's random source failed (OpenSSL RAND_bytes)");
  }
  return to_hex(reinterpret_cast<const unsigned char*>(raw.data()), bytes);
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

StatusOr<std::string> generate_job_secret() {
  return random_hex(32);
}

StatusOr<std::string> random_nonce() {
  return random_hex(16);
}

StatusOr<std::string> load_job_secret() {
  std::string secret;
  std::string from;
  if (const char* env = std::getenv(kSecretEnv); env && *env) {
    secret = trimmed(env), from = std::string("$") + kSecretEnv;
  } else {
    const char* file_env = std::getenv(kSecretFileEnv);
    std::string path = file_env && *file_env ? file_env : std::string(kSecretMountDir) + "/secret";
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return Status::NotFound(
          "no job secret: " + std::string(kSecretEnv) + " is unset and " + path +
          " cannot be read; on a cluster the operator mounts the job's Secret there (set " +
          kSecretFileEnv + " to another path), a local `tlt run` passes it to its workers");
    }
    std::stringstream ss;
    ss << in.rdbuf();
    secret = trimmed(ss.str()), from = path;
  }
  if (secret.size() < 16) {
    return Status::InvalidArgument("the job secret in " + from + " has " +
                                   std::to_string(secret.size()) +
                                   " bytes; it needs at least 16 (the operator writes 64)");
  }
  return secret;
}

StatusOr<std::string> ensure_job_secret(bool make_if_missing) {
  StatusOr<std::string> s = load_job_secret();
  if (s.ok() || !make_if_missing || s.status().code() != StatusCode::kNotFound) return s;
  StatusOr<std::string> made = generate_job_secret();
  if (!made.ok()) return made.status();
  if (::setenv(kSecretEnv, made->c_str(), 1) != 0)
    return Status::Internal(std::string("cannot set ") + kSecretEnv);
  return made;
}

std::string hmac_hex(const std::string& key, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &n);
  return to_hex(out, n);
}

bool equal_constant_time(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tlt::cluster
