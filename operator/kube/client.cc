// The Kubernetes REST client: paths, query strings, and HTTP -> Status, over an HttpTransport.
#include "operator/kube/client.h"

#include <cctype>
#include <cstdio>
#include <utility>

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

class RestKubeClient : public KubeClient {
 public:
  explicit RestKubeClient(std::unique_ptr<HttpTransport> transport)
      : transport_(std::move(transport)) {}

  StatusOr<Json> get(const Resource& r, const std::string& name) override {
    HttpRequest req;
    req.path = r.object_path(name);
    return exchange(req, "get", r.plural + "/" + name);
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
      StatusOr<Json> page = exchange(req, "list", r.plural);
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
    HttpRequest req;
    req.method = "POST";
    req.path = r.collection_path();
    req.headers["Content-Type"] = "application/json";
    req.body = object.dump();
    return exchange(req, "create", r.plural + "/" + name_of(object));
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
    return exchange(req, "apply", r.plural + "/" + name);
  }

  StatusOr<Json> patch_status(const Resource& r, const std::string& name,
                              const Json& status) override {
    HttpRequest req;
    req.method = "PATCH";
    req.path = r.object_path(name) + "/status";
    req.headers["Content-Type"] = "application/merge-patch+json";
    req.body = Json{{"status", status}}.dump();
    return exchange(req, "patch status of", r.plural + "/" + name);
  }

  StatusOr<Json> patch(const Resource& r, const std::string& name, const Json& patch) override {
    HttpRequest req;
    req.method = "PATCH";
    req.path = r.object_path(name);
    req.headers["Content-Type"] = "application/merge-patch+json";
    req.body = patch.dump();
    return exchange(req, "patch", r.plural + "/" + name);
  }

  Status remove(const Resource& r, const std::string& name) override {
    HttpRequest req;
    req.method = "DELETE";
    req.path = r.object_path(name);
    req.headers["Content-Type"] = "application/json";
    req.body = R"({"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"})";
    StatusOr<Json> out = exchange(req, "delete", r.plural + "/" + name);
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
    auto on_line = [&](const std::string& line) {
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
    StatusOr<HttpResponse> res = transport_->stream(req, on_line);
    if (!res.ok()) return res.status().with_context("watch " + r.plural);
    TLT_RETURN_IF_ERROR(status_from_response(*res, "watch", r.plural));
    return parse_error;
  }

 private:
  // One request; the parsed body on 2xx, else the mapped error.
  StatusOr<Json> exchange(const HttpRequest& req, const std::string& verb,
                          const std::string& what) {
    StatusOr<HttpResponse> res = transport_->send(req);
    if (!res.ok()) return res.status().with_context(verb + " " + what);
    TLT_RETURN_IF_ERROR(status_from_response(*res, verb, what));
    return parse_body(res->body, verb + " " + what);
  }

  const std::unique_ptr<HttpTransport> transport_;
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
  std::string text = verb + " " + what + ": HTTP " + std::to_string(code) + ": " + message;
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

std::unique_ptr<KubeClient> make_client(std::unique_ptr<HttpTransport> transport) {
  return std::make_unique<RestKubeClient>(std::move(transport));
}

}  // namespace tlt::kube
