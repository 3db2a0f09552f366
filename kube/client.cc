// The Kubernetes REST client: paths, query strings, HTTP -> Status, retries and the rate limit,
// over an HttpTransport.
#include "kube/client.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <utility>

#include "kube/rate_limiter.h"

namespace tlt::kube {
namespace {

using Json = nlohmann::json;

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// Appends "name=value" to a query string being built ("" -> "?a=b", "?a=b" -> "?a=b&c=d").
void add_query(std::string* query, const std::string& name, const std::string& value) {
  if (value.empty()) return;
  *query += (query->empty() ? "?" : "&") + name + "=" + url_encode(value);
}

// "Forbidden", "AlreadyExists": a metav1.Status reason (a CamelCase word).
bool is_camel_word(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::isupper(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
}

// The metav1.StatusReason the apiserver uses for `code`, for answers that carry none.
std::string http_reason(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return code >= 500 ? "InternalError" : "Unknown";
  }
}

std::string name_of(const Json& object) {
  if (!object.is_object() || !object.contains("metadata")) return "";
  return object["metadata"].value("name", "");
}

// Parses a JSON body, or returns Internal naming what was being read.
StatusOr<Json> parse_body(const std::string& body, const std::string& what) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return Status::Internal(what + ": the apiserver sent a body that is not JSON");
  return j;
}

// Whether `outcome` may be retried, by the rule in client.h.
bool retryable(const StatusOr<HttpResponse>& outcome, bool idempotent) {
  if (!outcome.ok()) {
    return outcome.status().code() == StatusCode::kUnavailable &&
           (idempotent || request_not_sent(outcome.status()));
  }
  int code = outcome->status;
  if (code == 429) return true;
  return idempotent && (code == 500 || code == 502 || code == 503 || code == 504);
}

// Retry-After as whole seconds (the apiserver's form); nullopt when absent or an HTTP date.
std::optional<std::chrono::seconds> retry_after(const StatusOr<HttpResponse>& outcome) {
  if (!outcome.ok()) return std::nullopt;
  auto it = outcome->headers.find("retry-after");
  if (it == outcome->headers.end()) return std::nullopt;
  std::string v = it->second;
  v.erase(0, v.find_first_not_of(" \t"));
  v.erase(v.find_last_not_of(" \t") + 1);
  if (v.empty() || v.size() > 9 ||
      !std::all_of(v.begin(), v.end(), [](unsigned char ch) { return std::isdigit(ch); }))
    return std::nullopt;
  return std::chrono::seconds(std::stol(v));
}

// Uniform in [0, 1), per thread.
double uniform01() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

ClientOptions clamped(ClientOptions o) {
  using std::chrono::milliseconds;
  o.max_retries = std::max(0, o.max_retries);
  o.initial_backoff = std::max(milliseconds(0), o.initial_backoff);
  o.max_backoff = std::max(milliseconds(0), o.max_backoff);
  o.jitter = std::isfinite(o.jitter) ? std::clamp(o.jitter, 0.0, 1.0) : 0.0;
  o.max_retry_time = std::max(milliseconds(0), o.max_retry_time);
  o.qps = std::isfinite(o.qps) ? std::max(0.0, o.qps) : 0.0;
  o.burst = std::max(1, o.burst);
  if (!o.clock) o.clock = real_clock();
  return o;
}

// `s` with "(n attempts)" appended when it took more than one.
Status after_attempts(const Status& s, int n) {
  if (n <= 1 || s.ok()) return s;
  return Status(s.code(), s.message() + " (" + std::to_string(n) + " attempts)");
}

class RestKubeClient : public KubeClient {
 public:
  RestKubeClient(std::unique_ptr<HttpTransport> transport, const ClientOptions& options)
      : transport_(std::move(transport)),
        options_(clamped(options)),
        clock_(options_.clock),
        bucket_(options_.qps, options_.burst, clock_) {}

  StatusOr<Json> get(const Resource& r, const std::string& name) override {
    HttpRequest req;
    req.path = r.object_path(name);
    return exchange(req, "get", r.plural + "/" + name, /*idempotent=*/true);
  }

  StatusOr<ObjectList> list(const Resource& r, const ListOptions& options) override {
    ObjectList out;
    std::string next;
    do {
      std::string query;
      add_query(&query, "labelSelector", options.label_selector);
      add_query(&query, "fieldSelector", options.field_selector);
      add_query(&query, "limit", std::to_string(options.page_size > 0 ? options.page_size : 500));
      add_query(&query, "continue", next);
      HttpRequest req;
      req.path = r.collection_path() + query;
      StatusOr<Json> page = exchange(req, "list", r.plural, /*idempotent=*/true);
      if (!page.ok()) return page.status();
      for (Json& item : (*page)["items"]) out.items.push_back(std::move(item));
      const Json& meta = (*page)["metadata"];
      next = meta.is_object() ? meta.value("continue", "") : "";
      if (next.empty() && meta.is_object())
        out.resource_version = meta.value("resourceVersion", "");
    } while (!next.empty());
    return out;
  }

  StatusOr<Json> create(const Resource& r, const Json& object) override {
    std::string query;
    add_query(&query, "fieldManager", options_.field_manager);
    add_query(&query, "fieldValidation", "Strict");  // an unknown field is refused, not dropped
    HttpRequest req;
    req.method = "POST";
    req.path = r.collection_path() + query;
    req.headers["Content-Type"] = "application/json";
    req.body = object.dump();
    return exchange(req, "create", r.plural + "/" + name_of(object), false);
  }

  StatusOr<Json> apply(const Resource& r, const Json& object,
                       const std::string& field_manager) override {
    std::string name = name_of(object);
    if (name.empty()) return Status::InvalidArgument("apply: the object has no metadata.name");
    if (field_manager.empty()) return Status::InvalidArgument("apply: give a field manager");
    std::string query;
    add_query(&query, "fieldManager", field_manager);
    add_query(&query, "force", "true");
    HttpRequest req;
    req.method = "PATCH";
    req.path = r.object_path(name) + query;
    // JSON is YAML, and the apply content type takes YAML.
    req.headers["Content-Type"] = "application/apply-patch+yaml";
    req.body = object.dump();
    return exchange(req, "apply", r.plural + "/" + name, false);
  }

  StatusOr<Json> patch_status(const Resource& r, const std::string& name, const Json& status,
                              const std::string& resource_version) override {
    HttpRequest req;
    req.method = "PATCH";
    req.path = r.object_path(name) + "/status";
    req.headers["Content-Type"] = "application/merge-patch+json";
    Json body{{"status", status}};
    if (!resource_version.empty()) body["metadata"]["resourceVersion"] = resource_version;
    req.body = body.dump();
    return exchange(req, "patch status of", r.plural + "/" + name, false);
  }

  StatusOr<Json> patch(const Resource& r, const std::string& name, const Json& patch) override {
    HttpRequest req;
    req.method = "PATCH";
    req.path = r.object_path(name);
    req.headers["Content-Type"] = "application/merge-patch+json";
    req.body = patch.dump();
    return exchange(req, "patch", r.plural + "/" + name, false);
  }

  Status remove(const Resource& r, const std::string& name) override {
    HttpRequest req;
    req.method = "DELETE";
    req.path = r.object_path(name);
    req.headers["Content-Type"] = "application/json";
    req.body = R"({"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"})";
    StatusOr<Json> out = exchange(req, "delete", r.plural + "/" + name, false);
    return out.ok() ? Status::Ok() : out.status();
  }

  Status watch(const Resource& r, const WatchOptions& options,
               const std::function<bool(const WatchEvent&)>& on_event) override {
    std::string query = "?watch=1";
    add_query(&query, "resourceVersion", options.resource_version);
    add_query(&query, "labelSelector", options.label_selector);
    add_query(&query, "timeoutSeconds", std::to_string(options.timeout_seconds));
    if (options.allow_bookmarks) add_query(&query, "allowWatchBookmarks", "true");
    HttpRequest req;
    req.path = r.collection_path() + query;
    req.timeout = std::chrono::seconds(options.timeout_seconds + 30);
    Status parse_error;
    bool delivered = false;  // a line arrived: the watch is under way and is not re-sent
    auto on_line = [&](const std::string& line) {
      delivered = true;
      if (line.empty()) return true;
      StatusOr<Json> j = parse_body(line, "watch " + r.plural);
      if (!j.ok()) {
        parse_error = j.status();
        return false;
      }
      WatchEvent event{j->value("type", ""), (*j)["object"]};
      if (event.type == "ERROR") {
        // The apiserver reports an expired resourceVersion inside the stream as a 410 Status.
        HttpResponse as_response{event.object.value("code", 500), event.object.dump()};
        parse_error = status_from_response(as_response, "watch", r.plural);
        return false;
      }
      return on_event(event);
    };
    // Not rate-limited: a watch is one long request, and the watches must not starve the rest.
    Attempts a = with_retries(/*idempotent=*/true, &delivered,
                              [&] { return transport_->stream(req, on_line); });
    if (!a.last.ok()) return after_attempts(a.last.status().with_context("watch " + r.plural), a.n);
    TLT_RETURN_IF_ERROR(after_attempts(status_from_response(*a.last, "watch", r.plural), a.n));
    return parse_error;
  }

 private:
  struct Attempts {
    StatusOr<HttpResponse> last;  // what the last attempt returned
    int n;                        // attempts made
  };

  // One request, rate-limited and retried; the parsed body on 2xx, else the mapped error.
  StatusOr<Json> exchange(const HttpRequest& req, const std::string& verb, const std::string& what,
                          bool idempotent) {
    Attempts a = with_retries(idempotent, nullptr, [&] {
      bucket_.acquire();
      return transport_->send(req);
    });
    if (!a.last.ok()) return after_attempts(a.last.status().with_context(verb + " " + what), a.n);
    TLT_RETURN_IF_ERROR(after_attempts(status_from_response(*a.last, verb, what), a.n));
    return parse_body(a.last->body, verb + " " + what);
  }

  // Calls `attempt` until its outcome is final by the rules in client.h, sleeping on clock_ in
  // between. `delivered`, when given, turns true once the attempt has passed data on: then its
  // outcome is final whatever it is.
  Attempts with_retries(bool idempotent, const bool* delivered,
                        const std::function<StatusOr<HttpResponse>()>& attempt) {
    const Clock::TimePoint start = clock_->now();
    Attempts a{attempt(), 1};
    while (a.n <= options_.max_retries && !(delivered && *delivered) &&
           retryable(a.last, idempotent)) {
      Clock::Duration wait = backoff(a.n - 1, a.last);
      if (clock_->now() + wait - start > options_.max_retry_time) break;  // out of time: give up
      clock_->sleep_for(wait);
      a.last = attempt();
      ++a.n;
    }
    return a;
  }

  // The wait before retry k (0-based): Retry-After when the response has it, else the jittered
  // exponential backoff.
  Clock::Duration backoff(int k, const StatusOr<HttpResponse>& outcome) const {
    if (std::optional<std::chrono::seconds> after = retry_after(outcome)) return *after;
    Clock::Duration b = options_.initial_backoff;
    for (int i = 0; i < k && b < options_.max_backoff; ++i) b *= 2;
    b = std::min<Clock::Duration>(b, options_.max_backoff);
    if (options_.jitter > 0) {
      b -= std::chrono::duration_cast<Clock::Duration>(b * (options_.jitter * uniform01()));
    }
    return b;
  }

  // Constant after construction.
  const std::unique_ptr<HttpTransport> transport_;
  const ClientOptions options_;  // clamped into range; clock set
  Clock* const clock_;
  // Thread-safe by itself.
  TokenBucket bucket_;
};

}  // namespace

std::string Resource::collection_path() const {
  std::string p = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (!namespace_.empty()) p += "/namespaces/" + namespace_;
  return p + "/" + plural;
}

std::string Resource::object_path(const std::string& name) const {
  return collection_path() + "/" + name;
}

std::string api_reason(const Status& status) {
  const std::string& m = status.message();
  for (size_t at = m.find("HTTP "); at != std::string::npos; at = m.find("HTTP ", at + 1)) {
    size_t word = m.find(' ', at + 5);
    size_t colon = word == std::string::npos ? word : m.find(':', word + 1);
    if (colon == std::string::npos) break;
    std::string digits = m.substr(at + 5, word - at - 5),
                reason = m.substr(word + 1, colon - word - 1);
    if (digits.size() == 3 && std::all_of(digits.begin(), digits.end(), ::isdigit) &&
        is_camel_word(reason))
      return reason;
  }
  switch (status.code()) {
    case StatusCode::kOk:
      return "";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kInvalidArgument:
      return "Invalid";
    case StatusCode::kFailedPrecondition:
      return "Forbidden";
    case StatusCode::kAborted:
      return "Conflict";
    case StatusCode::kUnavailable:
      return "ServiceUnavailable";
    case StatusCode::kDeadlineExceeded:
      return "Timeout";
    default:
      return "InternalError";
  }
}

Status status_from_response(const HttpResponse& response, const std::string& verb,
                            const std::string& what) {
  int code = response.status;
  if (code >= 200 && code < 300) return Status::Ok();
  Json body = Json::parse(response.body, nullptr, false);
  std::string message, reason;
  if (body.is_object()) {
    message = body.value("message", "");
    reason = body.value("reason", "");
  }
  if (message.empty()) message = response.body.substr(0, 300);
  if (reason.empty() || !is_camel_word(reason)) reason = http_reason(code);
  std::string text =
      verb + " " + what + ": HTTP " + std::to_string(code) + " " + reason + ": " + message;
  if (code == 404) return Status::NotFound(text);
  if (code == 409)
    return reason == "AlreadyExists" ? Status::AlreadyExists(text) : Status::Aborted(text);
  if (code == 400 || code == 422) return Status::InvalidArgument(text);
  if (code == 401 || code == 403) return Status::FailedPrecondition(text);
  if (code == 410)
    return Status::Aborted(verb + " " + what + ": 410 Gone: " + message + "; list again");
  if (code == 429 || code >= 500) return Status::Unavailable(text);
  return Status::Internal(text);
}

Status ClientOptions::validate() const {
  auto bad = [](const std::string& field, const std::string& rule, const std::string& got) {
    return Status::InvalidArgument("kube client option " + field + " must be " + rule + " (got " +
                                   got + ")");
  };
  if (max_retries < 0) return bad("max_retries", ">= 0", std::to_string(max_retries));
  if (initial_backoff.count() < 0) {
    return bad("initial_backoff", ">= 0 ms", std::to_string(initial_backoff.count()));
  }
  if (max_backoff.count() < 0) {
    return bad("max_backoff", ">= 0 ms", std::to_string(max_backoff.count()));
  }
  if (!(jitter >= 0 && jitter <= 1)) return bad("jitter", "in [0, 1]", std::to_string(jitter));
  if (max_retry_time.count() < 0) {
    return bad("max_retry_time", ">= 0 ms", std::to_string(max_retry_time.count()));
  }
  if (!(qps >= 0) || !std::isfinite(qps)) {
    return bad("qps", ">= 0 (0: unlimited)", std::to_string(qps));
  }
  if (qps > 0 && burst < 1) return bad("burst", ">= 1", std::to_string(burst));
  return Status::Ok();
}

std::unique_ptr<KubeClient> make_client(std::unique_ptr<HttpTransport> transport,
                                        const ClientOptions& options) {
  return std::make_unique<RestKubeClient>(std::move(transport), options);
}

std::unique_ptr<KubeClient> make_client(std::unique_ptr<HttpTransport> transport) {
  return make_client(std::move(transport), ClientOptions{});
}

}  // namespace tlt::kube
