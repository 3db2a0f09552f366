// A Kubernetes API client for the operator and a job's runtime (runtime/cluster/link.h): typed by
// resource, untyped in content (objects are nlohmann::json as the apiserver sends them; decoding a
// job is api/manifest.h's business).
//
// Every call is one request (list: one per page) through an HttpTransport; nothing is cached.
// Like client-go, the client itself retries transient failures and rate-limits its requests
// (ClientOptions); what is left over (a conflict, an exhausted retry) is the caller's work queue's.
//
// Retries. A request is tried again, after a backoff, when its outcome is transient AND retrying
// cannot apply a change twice:
//   - reads (get, every page of list, and the initial request of watch): on 429, 500, 502, 503,
//     504 and on any transport Unavailable (connection refused, reset, broken);
//   - writes (create, apply, patch_status, patch, remove): only on 429 (the apiserver refused the
//     request without acting on it) and on a transport failure before the request was sent
//     (connection refused or not made: http.h's kNotSent). Never on 5xx, a reset or a timeout,
//     after which the write may have happened.
//   - a watch whose stream has delivered a line is never re-sent (the caller resumes from the
//     last resourceVersion); timeouts (DeadlineExceeded) are never retried.
// At most 1 + max_retries attempts. The backoff before retry k (k = 0, 1, ...) is
// min(max_backoff, initial_backoff * 2^k), jittered down by up to `jitter` of itself; a response
// carrying Retry-After: N (seconds) waits exactly N s instead. No wait may end later than
// max_retry_time after the first attempt began: the client gives up at once instead. Giving up
// returns the last attempt's error (429 and 5xx: Unavailable) with "(N attempts)" appended.
//
// Rate limit. Every attempt of every non-watch request first takes a token from one token bucket
// (rate_limiter.h: qps, burst) shared by all threads using the client; watches do not count.
//
// Errors map from HTTP the way client-go does:
//   404 -> NotFound; 409 AlreadyExists (create) -> AlreadyExists; other 409 -> Aborted (re-read
//   and retry); 400, 422 -> InvalidArgument (the apiserver's message names the field);
//   401, 403 -> FailedPrecondition (credentials or RBAC); 410 -> Aborted with "410 Gone" in the
//   message (a watch or list resumed from a compacted resourceVersion: relist);
//   429, 5xx and transport failures -> Unavailable (the transport's timeout: DeadlineExceeded);
//   anything else -> Internal.
// Messages carry the apiserver's own `reason` and `message` fields: "create pods/x: HTTP 403
// Forbidden: pods \"x\" is forbidden: ..." (a standard reason for the code when the answer has
// none); api_reason() reads the reason back. create sends fieldValidation=Strict (an unknown
// field is a 400, not silently dropped) and ClientOptions::field_manager.
//
// Thread safety: KubeClient implementations are safe for concurrent use.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"
#include "kube/clock.h"
#include "kube/http.h"

namespace tlt::kube {

// A resource type and, for namespaced resources, a namespace ("" for all namespaces in list
// and watch, or for cluster-scoped resources).
struct Resource {
  std::string group;    // "" for the core group
  std::string version;  // "v1", "v1alpha1"
  std::string plural;   // "pods", "rljobs"
  std::string namespace_;

  // "/api/v1/namespaces/ns/pods" or "/apis/tlt.dev/v1alpha1/namespaces/ns/rljobs" (no
  // namespace segment when namespace_ is empty).
  std::string collection_path() const;
  // collection_path() + "/" + name.
  std::string object_path(const std::string& name) const;
};

struct ListOptions {
  std::string label_selector;  // "app=x,tier!=y"; "" for all
  std::string field_selector;  // "metadata.name=x"; "" for all
  int page_size = 500;         // items per request (limit); pages are followed via continue
};

struct ObjectList {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // of the list: where a watch starts
};

// One watch event: type ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and the object (for ERROR
// a metav1.Status).
struct WatchEvent {
  std::string type;
  nlohmann::json object;
};

struct WatchOptions {
  std::string resource_version;  // start after this version ("" = the current state first)
  std::string label_selector;
  int timeout_seconds = 300;  // the server ends the watch after this
  bool allow_bookmarks = true;
};

class KubeClient {
 public:
  virtual ~KubeClient() = default;

  // The object, or NotFound.
  virtual StatusOr<nlohmann::json> get(const Resource& r, const std::string& name) = 0;
  // Every object, following `continue` tokens across pages of options.page_size. A 410 in the
  // middle (the continue token expired) returns Aborted: list again.
  virtual StatusOr<ObjectList> list(const Resource& r, const ListOptions& options) = 0;
  // Creates `object` (its metadata.name set); returns the stored object. AlreadyExists if taken.
  virtual StatusOr<nlohmann::json> create(const Resource& r, const nlohmann::json& object) = 0;
  // Server-side apply of `object` (apiVersion, kind, metadata.name and the fields this manager
  // owns) as `field_manager`, forcing conflicts (the operator owns what it applies). Returns the
  // stored object. Creates the object when it does not exist.
  virtual StatusOr<nlohmann::json> apply(const Resource& r, const nlohmann::json& object,
                                         const std::string& field_manager) = 0;
  // JSON merge patch of the status subresource (`status` is the new status, or a part of it).
  // A non-empty `resource_version` applies it only to that version of the object: Aborted when
  // it changed since (re-read and retry). Returns the stored object; NotFound when it is gone.
  virtual StatusOr<nlohmann::json> patch_status(const Resource& r, const std::string& name,
                                                const nlohmann::json& status,
                                                const std::string& resource_version = "") = 0;
  // JSON merge patch (RFC 7386) of the object itself (not its status). A patch that carries
  // metadata.resourceVersion applies only to that version: Aborted when the object changed since
  // (re-read and retry). Returns the stored object; NotFound when the object is gone.
  virtual StatusOr<nlohmann::json> patch(const Resource& r, const std::string& name,
                                         const nlohmann::json& patch) = 0;
  // Deletes with background propagation (owned objects go too). NotFound when already gone.
  virtual Status remove(const Resource& r, const std::string& name) = 0;
  // Streams events to `on_event` until the server ends the watch (after
  // options.timeout_seconds), `on_event` returns false, or an error. Ok when the stream ended;
  // Aborted with "410 Gone" when options.resource_version is too old (list again); errors as
  // above. The caller resumes from the last event's metadata.resourceVersion.
  virtual Status watch(const Resource& r, const WatchOptions& options,
                       const std::function<bool(const WatchEvent&)>& on_event) = 0;
};

// Retries and rate limit of the client made by make_client (rules at the top of this file).
struct ClientOptions {
  int max_retries = 4;                              // retries after the first attempt; 0: none
  std::chrono::milliseconds initial_backoff{50};    // before the first retry; doubles after
  std::chrono::milliseconds max_backoff{2000};      // cap of one backoff (not of Retry-After)
  double jitter = 0.5;                              // a backoff b is drawn from [(1-jitter)b, b]
  std::chrono::milliseconds max_retry_time{10000};  // no retry wait ends later than this after
                                                    // the first attempt began
  // The token bucket: requests a second, all threads together (0: unlimited), and how many may
  // go at once. client-go defaults to 5 and 10; an operator reconciling many jobs needs more:
  // a job costs about 12-16 requests, so 50 pods/s (10 jobs of 5 pods) needs about 160 a second.
  double qps = 200;
  int burst = 400;
  Clock* clock = nullptr;  // borrowed, must outlive the client; nullptr: real_clock()
  std::string field_manager = "tlt-operator";  // create's fieldManager (managedFields)

  // InvalidArgument naming the field when a value is out of range (negative counts or times,
  // jitter outside [0, 1], burst < 1 with qps > 0).
  Status validate() const;
};

// The client over `transport` (owned), retrying and rate-limiting per `options`. Options that fail
// validate() are clamped into range (check them first to report the error).
std::unique_ptr<KubeClient> make_client(std::unique_ptr<HttpTransport> transport,
                                        const ClientOptions& options);
// The same with the default ClientOptions.
std::unique_ptr<KubeClient> make_client(std::unique_ptr<HttpTransport> transport);

// The apiserver's reason of a failed call ("Forbidden", "Invalid", "AlreadyExists",
// "RequestEntityTooLarge"), read from a message status_from_response made, else derived from
// the code (NotFound, AlreadyExists, Invalid, Forbidden, Conflict, ServiceUnavailable, Timeout,
// InternalError); "" for OK.
std::string api_reason(const Status& status);

// Maps an apiserver response to a Status as described at the top (OK for 2xx). `verb` and
// `what` make the message: "create rljobs/x: ...".
Status status_from_response(const HttpResponse& response, const std::string& verb,
                            const std::string& what);

}  // namespace tlt::kube
