// Encoding: visitors over the field tables that write JSON and the reference table.
#include "api/encode.h"

#include <sstream>

#include "api/validate.h"

namespace tlt::api {
namespace {

nlohmann::json encode_value(int32_t v) {
  return v;
}
nlohmann::json encode_value(int64_t v) {
  return v;
}
nlohmann::json encode_value(double v) {
  return v;
}
nlohmann::json encode_value(bool v) {
  return v;
}
nlohmann::json encode_value(const std::string& v) {
  return v;
}
nlohmann::json encode_value(const Duration& v) {
  return v.text;
}
nlohmann::json encode_value(const Quantity& v) {
  return v.text;
}
nlohmann::json encode_value(const FreeForm& v) {
  return v.value;
}
template <class T, std::enable_if_t<is_described<T>::value, int> = 0>
nlohmann::json encode_value(const T& v);
template <class T>
nlohmann::json encode_value(const std::vector<T>& v) {
  nlohmann::json arr = nlohmann::json::array();
  for (const T& item : v) arr.push_back(encode_value(item));
  return arr;
}
template <class T>
nlohmann::json encode_value(const std::map<std::string, T>& v) {
  nlohmann::json obj = nlohmann::json::object();
  for (const auto& [key, item] : v) obj[key] = encode_value(item);
  return obj;
}

class Encoder {
 public:
  explicit Encoder(nlohmann::json* out) : out_(out) {}
  template <class T>
  void operator()(const char* key, T& value, const Rule&) {
    (*out_)[key] = encode_value(value);
  }
  template <class T>
  void operator()(const char* key, std::optional<T>& value, const Rule&) {
    if (value) (*out_)[key] = encode_value(*value);
  }
  void operator()(const char* key, Opaque& value, const Rule&) {
    if (!value.value.is_null()) (*out_)[key] = value.value;
  }
  void operator()(const char* key, std::string& value, const Rule& rule) {
    // Optional strings stay out when empty, so encoded objects are what a user would write.
    if (!value.empty() || rule.required) (*out_)[key] = value;
  }

 private:
  nlohmann::json* out_;
};

template <class T, std::enable_if_t<is_described<T>::value, int>>
nlohmann::json encode_value(const T& v) {
  nlohmann::json obj = nlohmann::json::object();
  Encoder encoder(&obj);
  const_cast<T&>(v).fields(encoder);  // the encoder only reads
  return obj;
}

// ---- reference table --------------------------------------------------------------------------

std::string describe_rule(const Rule& r) {
  std::string s;
  if (r.min) s += std::string(r.min_exclusive ? "> " : ">= ") + format_number(*r.min);
  if (r.max)
    s += std::string(s.empty() ? "" : ", ") + (r.max_exclusive ? "< " : "<= ") +
         format_number(*r.max);
  for (const std::string& v : r.one_of) {
    if (!v.empty()) s += std::string(s.empty() ? "" : " \\| ") + "`" + v + "`";
  }
  if (r.format == Rule::Format::kDnsLabel) s += "DNS label";
  if (r.format == Rule::Format::kDevice) s += "`auto` \\| `cpu` \\| `cuda` \\| `cuda:N`";
  if (r.format == Rule::Format::kUrl)
    s += "http(s) URL of <= " + std::to_string(kMaxUrlLength) +
         " characters, without `.` or `..` path segments (nor `%2e`), `%2f`, `%5c` or `\\`";
  if (r.required) s += std::string(s.empty() ? "" : ", ") + "required";
  return s;
}

class ReferenceWriter {
 public:
  ReferenceWriter(std::string path, std::ostream* out) : path_(std::move(path)), out_(out) {}
  template <class T>
  void operator()(const char* key, T& value, const Rule& rule) {
    std::string p = join_path(path_, key);
    if constexpr (is_described<T>::value) {
      ReferenceWriter nested(p, out_);
      value.fields(nested);
    } else {
      std::string def = encode_value(value).dump();
      if (def.size() > 40) def = def.substr(0, 37) + "...";
      *out_ << "| `" << p << "` | `" << def << "` | " << describe_rule(rule) << " | "
            << rule.documentation << " |\n";
    }
  }
  template <class T>
  void operator()(const char* key, std::optional<T>&, const Rule& rule) {
    *out_ << "| `" << join_path(path_, key) << "` | unset | " << describe_rule(rule) << " | "
          << rule.documentation << " |\n";
  }

 private:
  std::string path_;
  std::ostream* out_;
};

template <class Spec>
std::string reference_for() {
  std::ostringstream out;
  out << "| field | default | allowed | meaning |\n|---|---|---|---|\n";
  Spec spec;
  ReferenceWriter writer("spec", &out);
  spec.fields(writer);
  return out.str();
}

}  // namespace

nlohmann::json to_json(const RLJob& job) {
  return encode_value(job);
}
nlohmann::json to_json(const TSTPretrainJob& job) {
  return encode_value(job);
}
nlohmann::json to_json(const RLJobSpec& spec) {
  return encode_value(spec);
}
nlohmann::json to_json(const TSTPretrainJobSpec& spec) {
  return encode_value(spec);
}
nlohmann::json to_json(const RLJobStatus& status) {
  return encode_value(status);
}
nlohmann::json to_json(const TSTPretrainJobStatus& status) {
  return encode_value(status);
}
nlohmann::json to_json(const SpeculativeSpec& spec) {
  return encode_value(spec);
}
nlohmann::json to_json(const DrafterSpec& spec) {
  return encode_value(spec);
}
nlohmann::json to_json(const AlgorithmSpec& spec) {
  return encode_value(spec);
}

std::string reference_markdown(const std::string& kind) {
  if (kind == kRLJobKind) return reference_for<RLJobSpec>();
  if (kind == kTSTPretrainJobKind) return reference_for<TSTPretrainJobSpec>();
  return "";
}

}  // namespace tlt::api
