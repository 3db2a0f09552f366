// The JSON types of a podTemplate: one table per Kubernetes object, walked recursively.
#include "operator/controller/pod_template.h"

#include <cmath>

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxShownValue = 60;

enum class Type { kString, kBool, kInt, kObject, kStringMap, kStringList, kObjectList };

// A member of an object and its type; `fields` are the members of each object (kObject,
// kObjectList) that are checked in turn, nullptr for none.
struct Field {
  const char* name;
  Type type;
  const std::vector<Field>* fields = nullptr;
};

const std::vector<Field> kCapabilities = {{"add", Type::kStringList}, {"drop", Type::kStringList}};
const std::vector<Field> kWindowsOptions = {{"hostProcess", Type::kBool}};
const std::vector<Field> kSeccompProfile = {{"type", Type::kString},
                                            {"localhostProfile", Type::kString}};
const std::vector<Field> kContainerSecurity = {{"privileged", Type::kBool},
                                               {"allowPrivilegeEscalation", Type::kBool},
                                               {"readOnlyRootFilesystem", Type::kBool},
                                               {"runAsNonRoot", Type::kBool},
                                               {"runAsUser", Type::kInt},
                                               {"runAsGroup", Type::kInt},
                                               {"procMount", Type::kString},
                                               {"capabilities", Type::kObject, &kCapabilities},
                                               {"windowsOptions", Type::kObject, &kWindowsOptions},
                                               {"seccompProfile", Type::kObject, &kSeccompProfile}};
const std::vector<Field> kResources = {{"requests", Type::kObject}, {"limits", Type::kObject}};
const std::vector<Field> kEnvVar = {
    {"name", Type::kString}, {"value", Type::kString}, {"valueFrom", Type::kObject}};
const std::vector<Field> kVolumeMount = {{"name", Type::kString},
                                         {"mountPath", Type::kString},
                                         {"subPath", Type::kString},
                                         {"readOnly", Type::kBool}};
const std::vector<Field> kPort = {{"containerPort", Type::kInt},
                                  {"hostPort", Type::kInt},
                                  {"name", Type::kString},
                                  {"protocol", Type::kString}};
const std::vector<Field> kContainer = {{"name", Type::kString},
                                       {"image", Type::kString},
                                       {"imagePullPolicy", Type::kString},
                                       {"workingDir", Type::kString},
                                       {"command", Type::kStringList},
                                       {"args", Type::kStringList},
                                       {"env", Type::kObjectList, &kEnvVar},
                                       {"envFrom", Type::kObjectList},
                                       {"volumeMounts", Type::kObjectList, &kVolumeMount},
                                       {"ports", Type::kObjectList, &kPort},
                                       {"resources", Type::kObject, &kResources},
                                       {"securityContext", Type::kObject, &kContainerSecurity}};
const std::vector<Field> kVolume = {
    {"name", Type::kString},      {"hostPath", Type::kObject},
    {"configMap", Type::kObject}, {"secret", Type::kObject},
    {"emptyDir", Type::kObject},  {"persistentVolumeClaim", Type::kObject},
    {"projected", Type::kObject}};
const std::vector<Field> kPodSecurity = {{"runAsNonRoot", Type::kBool},
                                         {"runAsUser", Type::kInt},
                                         {"runAsGroup", Type::kInt},
                                         {"fsGroup", Type::kInt},
                                         {"seccompProfile", Type::kObject, &kSeccompProfile},
                                         {"windowsOptions", Type::kObject, &kWindowsOptions}};
const std::vector<Field> kPodSpec = {{"containers", Type::kObjectList, &kContainer},
                                     {"initContainers", Type::kObjectList, &kContainer},
                                     {"ephemeralContainers", Type::kObjectList, &kContainer},
                                     {"volumes", Type::kObjectList, &kVolume},
                                     {"securityContext", Type::kObject, &kPodSecurity},
                                     {"hostNetwork", Type::kBool},
                                     {"hostPID", Type::kBool},
                                     {"hostIPC", Type::kBool},
                                     {"automountServiceAccountToken", Type::kBool},
                                     {"shareProcessNamespace", Type::kBool},
                                     {"serviceAccountName", Type::kString},
                                     {"serviceAccount", Type::kString},
                                     {"nodeName", Type::kString},
                                     {"priorityClassName", Type::kString},
                                     {"schedulerName", Type::kString},
                                     {"hostname", Type::kString},
                                     {"subdomain", Type::kString},
                                     {"restartPolicy", Type::kString},
                                     {"nodeSelector", Type::kStringMap},
                                     {"tolerations", Type::kObjectList},
                                     {"imagePullSecrets", Type::kObjectList}};
const std::vector<Field> kMetadata = {
    {"name", Type::kString},           {"generateName", Type::kString},
    {"namespace", Type::kString},      {"labels", Type::kStringMap},
    {"annotations", Type::kStringMap}, {"finalizers", Type::kStringList}};
const std::vector<Field> kPodTemplateSpec = {{"metadata", Type::kObject, &kMetadata},
                                             {"spec", Type::kObject, &kPodSpec}};

// A value as an error message shows it: scalars as JSON, cut to a sane length.
std::string shown(const Json& v) {
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > kMaxShownValue) s = s.substr(0, kMaxShownValue) + "...";
  return s;
}

bool is_integer(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

class Checker {
 public:
  explicit Checker(std::vector<std::string>* out) : out_(out) {}

  // The members of `object` listed in `fields`; an absent or null member is not checked.
  void members(const Json& object, const std::vector<Field>& fields, const std::string& at) {
    for (const Field& f : fields) {
      auto it = object.find(f.name);
      if (it != object.end() && !it->is_null()) value(*it, f, at + "." + f.name);
    }
  }

 private:
  void value(const Json& v, const Field& f, const std::string& at) {
    switch (f.type) {
      case Type::kString:
        if (!v.is_string()) wrong(at, "a string", v);
        return;
      case Type::kBool:
        if (!v.is_boolean()) wrong(at, "a boolean", v);
        return;
      case Type::kInt:
        if (!is_integer(v)) wrong(at, "an integer", v);
        return;
      case Type::kObject:
        if (!v.is_object()) return wrong(at, "an object", v);
        if (f.fields) members(v, *f.fields, at);
        return;
      case Type::kStringMap:
        if (!v.is_object()) return wrong(at, "an object of strings", v);
        for (const auto& [k, e] : v.items()) {
          if (!e.is_string()) wrong(at + "." + k, "a string", e);
        }
        return;
      case Type::kStringList:
        if (!v.is_array()) return wrong(at, "a list of strings", v);
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].is_string()) wrong(at + "[" + std::to_string(i) + "]", "a string", v[i]);
        }
        return;
      case Type::kObjectList:
        if (!v.is_array()) return wrong(at, "a list of objects", v);
        for (size_t i = 0; i < v.size(); ++i) {
          std::string item = at + "[" + std::to_string(i) + "]";
          if (!v[i].is_object()) {
            wrong(item, "an object", v[i]);
          } else if (f.fields) {
            members(v[i], *f.fields, item);
          }
        }
        return;
    }
  }

  void wrong(const std::string& at, const char* type, const Json& got) {
    out_->push_back(at + ": must be " + type + " (got " + shown(got) + ")");
  }

  std::vector<std::string>* out_;
};

}  // namespace

std::vector<std::string> check_template_types(const Json& pod_template, const std::string& path) {
  std::vector<std::string> out;
  if (!pod_template.is_object()) {
    out.push_back(path + ": must be an object (got " + shown(pod_template) + ")");
    return out;
  }
  Checker(&out).members(pod_template, kPodTemplateSpec, path);
  if (out.size() > kMaxTypeErrors) {
    size_t more = out.size() - kMaxTypeErrors;
    out.resize(kMaxTypeErrors);
    out.push_back("and " + std::to_string(more) + " more fields of the wrong type");
  }
  return out;
}

}  // namespace tlt::controller
