// Prometheus instant queries on cpprestsdk; every cpprestsdk exception stops here.
#include "operator/rebalancer/prometheus_client.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <system_error>

#include <cpprest/http_client.h>
#include <nlohmann/json.hpp>

namespace tlt::rebalancer {
namespace {

using Json = nlohmann::json;
namespace http = web::http;
namespace client = web::http::client;

// The first `n` characters of `text`, on one line, for error messages.
std::string excerpt(const std::string& text, size_t n = 200) {
  std::string out = text.substr(0, n);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text.size() > n ? out + "..." : out;
}

// j[key] when j is an object holding a string there, else "" (never throws on odd shapes).
std::string str(const Json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// One sample of a vector result: {"metric": {...}, "value": [<unix time>, "<value>"]}.
// Returns false when it is not of that shape; sets *finite false for NaN and +-Inf.
bool read_sample(const Json& item, Sample* out, bool* finite) {
  if (!item.is_object()) return false;
  const Json& metric = item.contains("metric") ? item["metric"] : Json();
  const Json& value = item.contains("value") ? item["value"] : Json();
  if (!metric.is_object() || !value.is_array() || value.size() != 2 || !value[1].is_string())
    return false;
  for (const auto& [k, v] : metric.items()) {
    if (!v.is_string()) return false;
    out->labels[k] = v.get<std::string>();
  }
  std::string text = value[1].get<std::string>();
  char* end = nullptr;
  out->value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) return false;
  *finite = std::isfinite(out->value);
  return true;
}

class CpprestPrometheus : public PrometheusClient {
 public:
  explicit CpprestPrometheus(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  StatusOr<std::vector<Sample>> query(const std::string& base_url,
                                      const std::string& promql) override {
    std::string what = "query " + base_url;
    try {
      client::http_client_config config;
      config.set_timeout(timeout_);
      client::http_client c(web::uri(base_url), config);
      http::http_request req(http::methods::GET);
      req.set_request_uri(web::uri("api/v1/query?query=" + url_encode(promql)));
      req.headers().add("Accept", "application/json");
      http::http_response res = c.request(req).get();
      return parse_query_response(res.status_code(), res.extract_string(true).get(), what);
    } catch (const http::http_exception& e) {
      if (e.error_code() == std::errc::timed_out)
        return Status::DeadlineExceeded(what + ": no answer within " +
                                        std::to_string(timeout_.count()) + " ms");
      return Status::Unavailable(what + ": " + e.what());
    } catch (const std::exception& e) {  // web::uri_exception for a malformed URL, and others
      return Status::Unavailable(what + ": " + e.what());
    }
  }

 private:
  const std::chrono::milliseconds timeout_;
};

}  // namespace

std::string url_encode(const std::string& text) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

StatusOr<std::vector<Sample>> parse_query_response(int http_status, const std::string& body,
                                                   const std::string& what) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  bool api_error = str(j, "status") == "error";
  if (http_status != 200) {
    std::string why = api_error ? str(j, "errorType") + ": " + str(j, "error") : excerpt(body);
    std::string msg = what + ": HTTP " + std::to_string(http_status) + ": " + why;
    if (api_error && http_status >= 400 && http_status < 500) return Status::InvalidArgument(msg);
    return Status::Unavailable(msg);
  }
  if (j.is_discarded() || !j.is_object())
    return Status::Corruption(what + ": the answer is not JSON: " + excerpt(body));
  if (api_error) {
    return Status::Corruption(what + ": status error: " + str(j, "errorType") + ": " +
                              str(j, "error"));
  }
  if (str(j, "status") != "success")
    return Status::Corruption(what +
                              ": no \"status\": \"success\" in the answer: " + excerpt(body));
  const Json& data = j.contains("data") ? j["data"] : Json();
  if (!data.is_object() || str(data, "resultType") != "vector" || !data.contains("result") ||
      !data["result"].is_array()) {
    return Status::Corruption(
        what + ": expected data.resultType \"vector\" with a result array: " + excerpt(body));
  }
  std::vector<Sample> samples;
  for (const Json& item : data["result"]) {
    Sample s;
    bool finite = true;
    if (!read_sample(item, &s, &finite))
      return Status::Corruption(what + ": unreadable sample " + excerpt(item.dump()));
    if (finite) samples.push_back(std::move(s));
  }
  return samples;
}

std::unique_ptr<PrometheusClient> make_prometheus_client(std::chrono::milliseconds timeout) {
  return std::make_unique<CpprestPrometheus>(timeout);
}

}  // namespace tlt::rebalancer
