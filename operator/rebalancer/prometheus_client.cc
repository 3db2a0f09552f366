// Prometheus instant queries on cpprestsdk; every cpprestsdk exception stops here.
#include "operator/rebalancer/prometheus_client.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <system_error>

#include <cpprest/http_client.h>
#include <nlohmann/json.hpp>

namespace tlt::rebalancer {
namespace {

using Json = nlohmann::json;
namespace http = web::http;
namespace client = web::http::client;

// The media type of a Content-Type header ("text/html" of "text/html; charset=utf-8"): its
// leading run of media-type characters, at most 64, parameters dropped; "none" when absent or
// not of the form type/subtype.
std::string media_type(const std::string& content_type) {
  std::string out;
  for (char c : content_type) {
    if (out.size() == 64 ||
        !(std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/.+-_", c)))
      break;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out.find('/') == std::string::npos ? "none" : out;
}

// Prometheus's documented errorType values: the only words of an error answer that are repeated.
std::string known_error_type(const std::string& type) {
  for (const char* t :
       {"bad_data", "timeout", "canceled", "execution", "unavailable", "not_found", "internal"}) {
    if (type == t) return type;
  }
  return "unknown";
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
      return parse_query_response(res.status_code(), res.headers().content_type(),
                                  res.extract_string(true).get(), what);
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

StatusOr<std::vector<Sample>> parse_query_response(int http_status, const std::string& content_type,
                                                   const std::string& body,
                                                   const std::string& what) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  bool api_error = str(j, "status") == "error";
  // Only the code, the content type and fixed words: never the body (whoever answered at a URL
  // a job named may be an internal endpoint whose answer its author must not read).
  const std::string head =
      what + ": HTTP " + std::to_string(http_status) + " (" + media_type(content_type) + "): ";
  if (http_status != 200) {
    std::string msg =
        head + (api_error ? "Prometheus API error " + known_error_type(str(j, "errorType"))
                          : std::string("not an answer of Prometheus's query API"));
    if (api_error && http_status >= 400 && http_status < 500) return Status::InvalidArgument(msg);
    return Status::Unavailable(msg);
  }
  if (j.is_discarded() || !j.is_object())
    return Status::Corruption(head + "the answer is not the JSON of Prometheus's query API");
  if (api_error)
    return Status::Corruption(head + "Prometheus API error " +
                              known_error_type(str(j, "errorType")));
  if (str(j, "status") != "success")
    return Status::Corruption(head + "no \"status\": \"success\" in the answer");
  const Json& data = j.contains("data") ? j["data"] : Json();
  if (!data.is_object() || str(data, "resultType") != "vector" || !data.contains("result") ||
      !data["result"].is_array()) {
    return Status::Corruption(head + "expected data.resultType \"vector\" with a result array");
  }
  std::vector<Sample> samples;
  for (size_t i = 0; i < data["result"].size(); ++i) {
    Sample s;
    bool finite = true;
    if (!read_sample(data["result"][i], &s, &finite))
      return Status::Corruption(head + "data.result[" + std::to_string(i) + "] is not a sample");
    if (finite) samples.push_back(std::move(s));
  }
  return samples;
}

std::unique_ptr<PrometheusClient> make_prometheus_client(std::chrono::milliseconds timeout) {
  return std::make_unique<CpprestPrometheus>(timeout);
}

}  // namespace tlt::rebalancer
