// YAML -> spec decoding, one visitor over the field tables of api/spec.h.
#include "api/decode.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

namespace tlt::api {
namespace {

constexpr size_t kMaxShownValue = 60;

// The scalar as it should appear in an error message: quoted and cut to a sane length.
std::string shown(const YAML::Node& node) {
  if (!node.IsScalar()) {
    return node.IsSequence() ? "a list" : node.IsMap() ? "a mapping" : "nothing";
  }
  std::string s = node.Scalar();
  if (s.size() > kMaxShownValue) s = s.substr(0, kMaxShownValue) + "...";
  return "\"" + s + "\"";
}

void add(FieldErrors* errors, const std::string& path, std::string message) {
  errors->push_back({path, std::move(message)});
}

bool is_plain(const YAML::Node& node) {
  return node.Tag() != "!";
}

bool parse_int(const std::string& s, long long* out) {
  if (s.empty() || s.size() > 32) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

bool parse_float(const std::string& s, double* out) {
  if (s.empty() || s.size() > 64) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  // strtod accepts hex floats and "infinity"; a job spec means decimal numbers.
  if (s.find_first_of("xXnNiI") != std::string::npos) return false;
  *out = v;
  return true;
}

// ---- scalar decoders ------------------------------------------------------------------------

bool need_scalar(const YAML::Node& node, const std::string& path, const char* what,
                 FieldErrors* errors) {
  if (node.IsScalar()) return true;
  add(errors, path, std::string("must be ") + what + " (got " + shown(node) + ")");
  return false;
}

template <class Int>
void decode_int(const YAML::Node& node, const std::string& path, Int& out, FieldErrors* errors) {
  if (!need_scalar(node, path, "an integer", errors)) return;
  long long v = 0;
  if (!parse_int(node.Scalar(), &v)) {
    add(errors, path, "must be an integer (got " + shown(node) + ")");
    return;
  }
  if (v < static_cast<long long>(std::numeric_limits<Int>::min()) ||
      v > static_cast<long long>(std::numeric_limits<Int>::max())) {
    add(errors, path,
        "must be an integer between " + std::to_string(std::numeric_limits<Int>::min()) + " and " +
            std::to_string(std::numeric_limits<Int>::max()) + " (got " + shown(node) + ")");
    return;
  }
  out = static_cast<Int>(v);
}

void decode_value(const YAML::Node& n, const std::string& p, int32_t& out, FieldErrors* e) {
  decode_int(n, p, out, e);
}
void decode_value(const YAML::Node& n, const std::string& p, int64_t& out, FieldErrors* e) {
  decode_int(n, p, out, e);
}

void decode_value(const YAML::Node& node, const std::string& path, double& out,
                  FieldErrors* errors) {
  if (!need_scalar(node, path, "a number", errors)) return;
  double v = 0;
  if (!parse_float(node.Scalar(), &v)) {
    add(errors, path, "must be a finite decimal number (got " + shown(node) + ")");
    return;
  }
  out = v;
}

void decode_value(const YAML::Node& node, const std::string& path, bool& out, FieldErrors* errors) {
  if (!need_scalar(node, path, "true or false", errors)) return;
  const std::string& s = node.Scalar();
  if (s == "true" || s == "True" || s == "TRUE") {
    out = true;
  } else if (s == "false" || s == "False" || s == "FALSE") {
    out = false;
  } else {
    add(errors, path, "must be true or false (got " + shown(node) + ")");
  }
}

void decode_value(const YAML::Node& node, const std::string& path, std::string& out,
                  FieldErrors* errors) {
  if (!need_scalar(node, path, "a string", errors)) return;
  out = node.Scalar();
}

void decode_value(const YAML::Node& node, const std::string& path, Duration& out,
                  FieldErrors* errors) {
  if (!need_scalar(node, path, "a duration", errors)) return;
  double seconds = 0;
  if (!parse_duration(node.Scalar(), &seconds)) {
    add(errors, path,
        "must be a duration such as \"60s\", \"5m\" or \"1h30m\" (got " + shown(node) + ")");
    return;
  }
  out.text = node.Scalar();
  out.seconds = seconds;
}

void decode_value(const YAML::Node& node, const std::string& path, Quantity& out,
                  FieldErrors* errors) {
  if (!need_scalar(node, path, "a quantity", errors)) return;
  if (!is_quantity(node.Scalar())) {
    add(errors, path,
        "must be a non-negative Kubernetes quantity such as \"2\", \"500m\" or \"8Gi\" (got " +
            shown(node) + ")");
    return;
  }
  out.text = node.Scalar();
}

void decode_value(const YAML::Node& node, const std::string& path, FreeForm& out,
                  FieldErrors* errors) {
  if (!node.IsMap()) {
    add(errors, path, "must be a mapping (got " + shown(node) + ")");
    return;
  }
  out.value = yaml_to_json(node);
}

void decode_value(const YAML::Node& node, const std::string&, Opaque& out, FieldErrors*) {
  out.value = yaml_to_json(node);
}

// ---- containers and structs -----------------------------------------------------------------

template <class T>
void decode_value(const YAML::Node& node, const std::string& path, std::optional<T>& out,
                  FieldErrors* errors);
template <class T>
void decode_value(const YAML::Node& node, const std::string& path, std::vector<T>& out,
                  FieldErrors* errors);
template <class T>
void decode_value(const YAML::Node& node, const std::string& path, std::map<std::string, T>& out,
                  FieldErrors* errors);
template <class T, std::enable_if_t<is_described<T>::value, int> = 0>
void decode_value(const YAML::Node& node, const std::string& path, T& out, FieldErrors* errors);

// Visits one mapping: decodes the fields a struct asks for, then reports the keys it never
// asked for (typos) and keys given twice.
class MapDecoder {
 public:
  MapDecoder(const YAML::Node& map, std::string path, FieldErrors* errors)
      : map_(map), path_(std::move(path)), errors_(errors) {}

  template <class T>
  void operator()(const char* key, T& out, const Rule&) {
    known_.emplace_back(key);
    const YAML::Node child = map_[key];
    if (!child.IsDefined() || child.IsNull()) return;  // absent or null keeps the default
    decode_value(child, join_path(path_, key), out, errors_);
  }

  void finish() {
    std::set<std::string> seen;
    for (const auto& kv : map_) {
      if (!kv.first.IsScalar()) {
        add(errors_, path_, "keys must be plain strings (got " + shown(kv.first) + ")");
        continue;
      }
      const std::string& key = kv.first.Scalar();
      std::string child_path = join_path(path_, key);
      if (!seen.insert(key).second) {
        add(errors_, child_path, "is given twice; keep one");
        continue;
      }
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string hint = nearest_name(key, known_);
      add(errors_, child_path,
          hint.empty() ? "unknown field; known fields here: " + known_list()
                       : "unknown field; did you mean \"" + hint + "\"?");
    }
  }

 private:
  std::string known_list() const {
    std::string s;
    for (const std::string& k : known_) s += (s.empty() ? "" : ", ") + k;
    return s;
  }

  const YAML::Node map_;
  const std::string path_;
  FieldErrors* errors_;
  std::vector<std::string> known_;
};

template <class T, std::enable_if_t<is_described<T>::value, int>>
void decode_value(const YAML::Node& node, const std::string& path, T& out, FieldErrors* errors) {
  if (!node.IsMap()) {
    add(errors, path, "must be a mapping of fields (got " + shown(node) + ")");
    return;
  }
  MapDecoder decoder(node, path, errors);
  out.fields(decoder);
  decoder.finish();
}

template <class T>
void decode_value(const YAML::Node& node, const std::string& path, std::optional<T>& out,
                  FieldErrors* errors) {
  T value{};
  size_t before = errors->size();
  decode_value(node, path, value, errors);
  if (errors->size() == before) out = std::move(value);
}

template <class T>
void decode_value(const YAML::Node& node, const std::string& path, std::vector<T>& out,
                  FieldErrors* errors) {
  if (!node.IsSequence()) {
    add(errors, path, "must be a list (got " + shown(node) + ")");
    return;
  }
  std::vector<T> values(node.size());
  for (size_t i = 0; i < node.size(); ++i) {
    decode_value(node[i], index_path(path, i), values[i], errors);
  }
  out = std::move(values);
}

template <class T>
void decode_value(const YAML::Node& node, const std::string& path, std::map<std::string, T>& out,
                  FieldErrors* errors) {
  if (!node.IsMap()) {
    add(errors, path, "must be a mapping (got " + shown(node) + ")");
    return;
  }
  std::map<std::string, T> values;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      add(errors, path, "keys must be plain strings (got " + shown(kv.first) + ")");
      continue;
    }
    std::string child_path = join_path(path, kv.first.Scalar());
    if (values.count(kv.first.Scalar())) {
      add(errors, child_path, "is given twice; keep one");
      continue;
    }
    decode_value(kv.second, child_path, values[kv.first.Scalar()], errors);
  }
  out = std::move(values);
}

// Bounds recursion when converting untrusted trees: YAML nested this deep is an attack or a bug.
constexpr int kMaxDepth = 64;

nlohmann::json yaml_to_json_at(const YAML::Node& node, int depth) {
  if (depth > kMaxDepth) return nullptr;
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json obj = nlohmann::json::object();
      for (const auto& kv : node) {
        std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
        obj[key] = yaml_to_json_at(kv.second, depth + 1);
      }
      return obj;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& item : node) arr.push_back(yaml_to_json_at(item, depth + 1));
      return arr;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (!is_plain(node)) return s;
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      if (s == "null" || s == "Null" || s == "NULL" || s == "~" || s.empty()) return nullptr;
      long long i = 0;
      if (parse_int(s, &i)) return i;
      double d = 0;
      if (parse_float(s, &d)) return d;
      return s;
    }
    default:
      return nullptr;
  }
}

YAML::Node json_to_yaml_at(const nlohmann::json& value, int depth) {
  if (depth > kMaxDepth) return YAML::Node(YAML::NodeType::Null);
  if (value.is_object()) {
    YAML::Node map(YAML::NodeType::Map);
    for (auto it = value.begin(); it != value.end(); ++it) {
      map[it.key()] = json_to_yaml_at(it.value(), depth + 1);
    }
    return map;
  }
  if (value.is_array()) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (const auto& item : value) seq.push_back(json_to_yaml_at(item, depth + 1));
    return seq;
  }
  if (value.is_null()) return YAML::Node(YAML::NodeType::Null);
  if (value.is_string()) {
    YAML::Node s(value.get<std::string>());
    s.SetTag("!");  // quoted: stays a string
    return s;
  }
  return YAML::Node(value.dump());  // numbers and booleans, in JSON's spelling
}

template <class Job>
void decode_job(const YAML::Node& node, Job* out, FieldErrors* errors) {
  if (!node.IsMap()) {
    add(errors, "",
        "a job manifest must be a mapping with apiVersion, kind, metadata and spec "
        "(got " +
            shown(node) + ")");
    return;
  }
  decode_value(node, "", *out, errors);
}

}  // namespace

void decode(const YAML::Node& node, RLJob* out, FieldErrors* errors) {
  decode_job(node, out, errors);
}
void decode(const YAML::Node& node, TSTPretrainJob* out, FieldErrors* errors) {
  decode_job(node, out, errors);
}

void decode(const nlohmann::json& value, const std::string& path, SpeculativeSpec* out,
            FieldErrors* errors) {
  decode_value(json_to_yaml(value), path, *out, errors);
}
void decode(const nlohmann::json& value, const std::string& path, DrafterSpec* out,
            FieldErrors* errors) {
  decode_value(json_to_yaml(value), path, *out, errors);
}
void decode(const nlohmann::json& value, const std::string& path, AlgorithmSpec* out,
            FieldErrors* errors) {
  decode_value(json_to_yaml(value), path, *out, errors);
}

nlohmann::json yaml_to_json(const YAML::Node& node) {
  return yaml_to_json_at(node, 0);
}
YAML::Node json_to_yaml(const nlohmann::json& value) {
  return json_to_yaml_at(value, 0);
}

}  // namespace tlt::api
