// The vocabulary every job-spec type is described in: one field table per struct.
//
// Each spec struct lists its fields once, in a `fields(V& v)` member template:
//
//   template <class V> void fields(V& v) {
//     v("replicas", replicas, Rule().ge(1).doc("Pods that run this role."));
//   }
//
// and every tool that needs to know the fields is a visitor of that table: the YAML/JSON
// decoder (api/decode.cc, which also rejects unknown fields), the range validator
// (api/validate.cc), the JSON encoder (api/encode.cc) and the reference-doc writer. Defaults
// are the member initialisers, so they too live in exactly one place. Rules that relate two
// fields live in a struct's optional `void check(const std::string& path, FieldErrors*) const`.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tlt::api {

// One problem in a manifest: where ("spec.roles.rollout.replicas") and what to do about it.
struct FieldError {
  std::string path;
  std::string message;
  std::string to_string() const { return path.empty() ? message : path + ": " + message; }
};
using FieldErrors = std::vector<FieldError>;

// Joins a parent path and a child key: ("spec", "roles") -> "spec.roles"; ("", "spec") -> "spec".
inline std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}
inline std::string index_path(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

// A duration written the Kubernetes way: "60s", "1m30s", "500ms", "2h". Parsed on decode.
struct Duration {
  std::string text;                      // as written, e.g. "60s"
  double seconds = 0.0;                  // parsed value
  static Duration of(const char* text);  // for defaults; asserts the literal parses
};

// A Kubernetes resource quantity: "2", "500m", "8Gi", "1e3". Kept as written, checked on decode.
struct Quantity {
  std::string text;
};

// Free-form JSON object kept as given (a pod template): not checked by tlt beyond its being an
// object, so the apiserver's own schema applies to it.
struct FreeForm {
  nlohmann::json value = nlohmann::json::object();
};

// Any JSON value, accepted and carried but never interpreted (apiserver bookkeeping such as
// metadata.managedFields).
struct Opaque {
  nlohmann::json value;  // null when absent
};

// The longest URL a url() field holds (it bounds the cost of the CRD's CEL rules on it).
inline constexpr size_t kMaxUrlLength = 2048;

// What a field may hold, and its one-line documentation. Built fluently:
//   Rule().ge(1).le(64).doc("...")
struct Rule {
  std::optional<double> min, max;
  bool min_exclusive = false, max_exclusive = false;
  std::vector<std::string> one_of;  // allowed values of a string field
  enum class Format { kNone, kDnsLabel, kUrl, kPath, kDevice } format = Format::kNone;
  std::optional<size_t> max_items;   // most items a list field may hold
  std::optional<size_t> max_length;  // longest string (for a list of strings: each item)
  bool required = false;             // must be present and non-empty
  bool immutable = false;            // may not change once the job exists (enforced by the CRD)
  std::string reason;                // why the range is what it is; ends its range errors
  std::string documentation;

  Rule& ge(double v) {
    min = v;
    min_exclusive = false;
    return *this;
  }
  Rule& gt(double v) {
    min = v;
    min_exclusive = true;
    return *this;
  }
  Rule& le(double v) {
    max = v;
    max_exclusive = false;
    return *this;
  }
  Rule& lt(double v) {
    max = v;
    max_exclusive = true;
    return *this;
  }
  Rule& values(std::vector<std::string> v) {
    one_of = std::move(v);
    return *this;
  }
  Rule& dns_label() {
    format = Format::kDnsLabel;
    return *this;
  }
  // "auto", "cpu", "cuda" or "cuda:N" (api/device_name.h); "" is refused.
  Rule& device() {
    format = Format::kDevice;
    return *this;
  }
  // An http(s) URL of at most kMaxUrlLength characters whose path url_path_problem accepts.
  Rule& url() {
    format = Format::kUrl;
    max_length = kMaxUrlLength;
    return *this;
  }
  // Bounds that keep the CRD's CEL rules within the apiserver's cost budget (which needs
  // maxItems/maxLength on what a rule iterates over); the validator enforces them too.
  Rule& at_most_items(size_t n) {
    max_items = n;
    return *this;
  }
  Rule& at_most_chars(size_t n) {
    max_length = n;
    return *this;
  }
  Rule& must() {
    required = true;
    return *this;
  }
  Rule& fixed() {
    immutable = true;
    return *this;
  }
  Rule& because(std::string why) {
    reason = std::move(why);
    return *this;
  }
  Rule& doc(std::string d) {
    documentation = std::move(d);
    return *this;
  }
};

// Parses "1h2m3.5s", "500ms", "90s", "2m". Returns false (and leaves *seconds) on bad syntax.
// Units: ns, us, ms, s, m, h. A bare number is not accepted: the unit says what is meant.
bool parse_duration(const std::string& text, double* seconds);

// Checks Kubernetes quantity syntax, non-negative: [+]?digits[.digits][suffix], suffix one of
// Ki Mi Gi Ti Pi Ei n u m k M G T P E, or an exponent e<int>/E<int>; at most 64 characters.
bool is_quantity(const std::string& text);

// DNS-1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric.
bool is_dns_label(const std::string& text);

// Why the path of `url` (an http(s) URL) is refused, or "" when it is not: a "." or ".." segment,
// also written with %2e (servers resolve it, so the URL reaches outside the prefix an allow-list
// compares), or an encoded slash or a backslash (%2f, %5c, \) before the query (servers may read
// it as "/"). Nothing normalises a URL: the one checked is the one fetched.
std::string url_path_problem(const std::string& url);

// The candidate closest to `word` by edit distance, or "" when none is close enough to be a
// plausible typo (distance > max(2, |word|/3)).
std::string nearest_name(const std::string& word, const std::vector<std::string>& candidates);

// SFINAE helper: does T have a `check(path, errors)` cross-field rule?
template <class T, class = void>
struct has_check : std::false_type {};
template <class T>
struct has_check<T, std::void_t<decltype(std::declval<const T&>().check(
                        std::declval<const std::string&>(), std::declval<FieldErrors*>()))>>
    : std::true_type {};

// SFINAE helper: is T a described struct (has a fields() table)?
struct NullVisitor {
  template <class F>
  void operator()(const char*, F&, const Rule&) {}
};
template <class T, class = void>
struct is_described : std::false_type {};
template <class T>
struct is_described<T,
                    std::void_t<decltype(std::declval<T&>().fields(std::declval<NullVisitor&>()))>>
    : std::true_type {};

}  // namespace tlt::api
