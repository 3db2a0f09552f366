// Validation: a visitor that applies each field's Rule, then the structs' cross-field checks.
#include "api/validate.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <type_traits>

#include "api/device_name.h"

namespace tlt::api {

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string format_seconds(double seconds) {
  return format_number(seconds) + " s";
}

namespace {

// What a device field's error says (Rule::Format::kDevice).
constexpr const char* kDeviceChoices =
    "must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\" (N: a CUDA device's ordinal, e.g. cuda:0)";

void add(FieldErrors* errors, const std::string& path, std::string message) {
  errors->push_back({path, std::move(message)});
}

std::string quoted_list(const std::vector<std::string>& values) {
  std::string s;
  for (const std::string& v : values) {
    if (v.empty()) continue;  // "" is "unset"; not worth suggesting
    s += (s.empty() ? "\"" : ", \"") + v + "\"";
  }
  return s;
}

void check_number(double v, const std::string& path, const Rule& rule, FieldErrors* errors) {
  const std::string why = rule.reason.empty() ? "" : ": " + rule.reason;
  if (rule.min) {
    bool bad = rule.min_exclusive ? !(v > *rule.min) : !(v >= *rule.min);
    if (bad) {
      add(errors, path,
          std::string("must be ") + (rule.min_exclusive ? "> " : ">= ") + format_number(*rule.min) +
              " (got " + format_number(v) + ")" + why);
      return;
    }
  }
  if (rule.max) {
    bool bad = rule.max_exclusive ? !(v < *rule.max) : !(v <= *rule.max);
    if (bad) {
      add(errors, path,
          std::string("must be ") + (rule.max_exclusive ? "< " : "<= ") + format_number(*rule.max) +
              " (got " + format_number(v) + ")" + why);
    }
  }
}

bool looks_like_url(const std::string& s) {
  for (const char* scheme : {"http://", "https://"}) {
    std::string p(scheme);
    if (s.compare(0, p.size(), p) == 0 && s.size() > p.size() &&
        s.find_first_of(" \t\n") == std::string::npos) {
      return true;
    }
  }
  return false;
}

void check_string(const std::string& v, const std::string& path, const Rule& rule,
                  FieldErrors* errors) {
  if (rule.max_length && v.size() > *rule.max_length) {
    add(errors, path,
        "must be at most " + std::to_string(*rule.max_length) + " characters (got " +
            std::to_string(v.size()) + ")");
    return;
  }
  if (v.empty()) {
    // An explicit empty value ("", or a bare YAML tag) is not "unset" for an enum without "".
    bool empty_allowed = (rule.one_of.empty() && rule.format != Rule::Format::kDevice) ||
                         std::find(rule.one_of.begin(), rule.one_of.end(), "") != rule.one_of.end();
    if (rule.required) {
      add(errors, path, "is required; set a value");
    } else if (rule.format == Rule::Format::kDevice) {
      add(errors, path, std::string(kDeviceChoices) + " (got \"\")");
    } else if (!empty_allowed) {
      add(errors, path, "must be one of " + quoted_list(rule.one_of) + " (got \"\")");
    }
    return;
  }
  if (!rule.one_of.empty() &&
      std::find(rule.one_of.begin(), rule.one_of.end(), v) == rule.one_of.end()) {
    std::string hint = nearest_name(v, rule.one_of);
    add(errors, path,
        "must be one of " + quoted_list(rule.one_of) + " (got \"" + v + "\")" +
            (hint.empty() || hint == v ? "" : "; did you mean \"" + hint + "\"?"));
    return;
  }
  if (rule.format == Rule::Format::kDnsLabel && !is_dns_label(v)) {
    add(errors, path,
        "must be a DNS label: lower-case letters, digits and '-', starting and "
        "ending with a letter or digit, at most 63 characters (got \"" +
            v + "\")");
  }
  if (rule.format == Rule::Format::kDevice && !parse_device_name(v)) {
    add(errors, path, std::string(kDeviceChoices) + " (got \"" + v + "\")");
  }
  if (rule.format == Rule::Format::kUrl) {
    if (!looks_like_url(v)) {
      add(errors, path, "must be an http:// or https:// URL (got \"" + v + "\")");
    } else if (std::string why = url_path_problem(v); !why.empty()) {
      add(errors, path, why + " (got \"" + v + "\")");
    }
  }
}

class Validator {
 public:
  Validator(std::string path, FieldErrors* errors) : path_(std::move(path)), errors_(errors) {}

  template <class T>
  void operator()(const char* key, T& value, const Rule& rule) {
    check(value, join_path(path_, key), rule);
  }

 private:
  void check(int32_t v, const std::string& p, const Rule& r) { check_number(v, p, r, errors_); }
  void check(int64_t v, const std::string& p, const Rule& r) {
    check_number(static_cast<double>(v), p, r, errors_);
  }
  void check(double v, const std::string& p, const Rule& r) { check_number(v, p, r, errors_); }
  void check(bool, const std::string&, const Rule&) {}
  void check(const std::string& v, const std::string& p, const Rule& r) {
    check_string(v, p, r, errors_);
  }
  void check(const Duration& v, const std::string& p, const Rule& r) {
    if (r.min && !(r.min_exclusive ? v.seconds > *r.min : v.seconds >= *r.min)) {
      add(errors_, p,
          std::string("must be ") + (r.min_exclusive ? "longer than " : "at least ") +
              format_number(*r.min) + "s (got \"" + v.text + "\")");
    }
  }
  void check(const Quantity&, const std::string&, const Rule&) {}
  void check(const FreeForm&, const std::string&, const Rule&) {}
  void check(const Opaque&, const std::string&, const Rule&) {}
  template <class T>
  void check(const std::optional<T>& v, const std::string& p, const Rule& r) {
    if (v) check(*v, p, r);
  }
  template <class T>
  void check(const std::vector<T>& v, const std::string& p, const Rule& r) {
    if (r.required && v.empty()) add(errors_, p, "must not be empty");
    if (r.max_items && v.size() > *r.max_items) {
      add(errors_, p,
          "must list at most " + std::to_string(*r.max_items) + " items (got " +
              std::to_string(v.size()) + ")");
    }
    for (size_t i = 0; i < v.size(); ++i) check_element(v[i], index_path(p, i), r);
  }
  template <class T>
  void check(const std::map<std::string, T>& v, const std::string& p, const Rule& r) {
    if (r.required && v.empty()) add(errors_, p, "must not be empty");
  }
  template <class T, std::enable_if_t<is_described<T>::value, int> = 0>
  void check(const T& v, const std::string& p, const Rule&) {
    Validator nested(p, errors_);
    const_cast<T&>(v).fields(nested);  // visitors only read; fields() is shared with decoding
    if constexpr (has_check<T>::value) v.check(p, errors_);
  }
  template <class T>
  void check_element(const T& v, const std::string& p, const Rule& list_rule) {
    if constexpr (is_described<T>::value) check(v, p, Rule());
    if constexpr (std::is_same_v<T, std::string>) {
      if (list_rule.max_length) {
        Rule length_only;
        length_only.max_length = list_rule.max_length;
        check_string(v, p, length_only, errors_);
      }
    }
  }

  const std::string path_;
  FieldErrors* errors_;
};

template <class T>
void validate_at(const T& value, const std::string& path, FieldErrors* errors) {
  Validator v("", errors);
  v(path.c_str(), const_cast<T&>(value), Rule());
}

template <class Job>
void validate_job(const Job& job, FieldErrors* errors) {
  if (job.api_version != kApiVersion) {
    add(errors, "apiVersion",
        std::string("must be \"") + kApiVersion + "\" (got \"" + job.api_version + "\")");
  }
  validate_at(job.metadata, "metadata", errors);
  validate_at(job.spec, "spec", errors);
}

}  // namespace

void validate(const RLJob& job, FieldErrors* errors) {
  validate_job(job, errors);
}
void validate(const TSTPretrainJob& job, FieldErrors* errors) {
  validate_job(job, errors);
}

void check_model_context(const AlgorithmSpec& algorithm, int64_t context, const std::string& model,
                         FieldErrors* errors) {
  int64_t response = algorithm.max_response_tokens;
  if (context - response - kDraftHeadroom >= 1) return;
  std::string fix = context - kDraftHeadroom > 1
                        ? "; set it below " + std::to_string(context - kDraftHeadroom) +
                              ", leaving room for the longest prompt"
                        : "; use a model of longer context";
  add(errors, "spec.algorithm.maxResponseTokens",
      std::to_string(response) + " tokens of response and " + std::to_string(kDraftHeadroom) +
          " of drafting headroom leave no room for a prompt in the " + std::to_string(context) +
          "-token context of " + model + fix);
}

// ---- cross-field rules ------------------------------------------------------------------------

namespace {
// Pod names are "<job>-<role>-<index>"; the longest role is "rollout"/"drafter"/"trainer" (7)
// and indexes go to 4 digits: 47 + 1 + 7 + 1 + 4 = 60 <= 63 (DNS label).
constexpr size_t kMaxJobName = 47;
}  // namespace

void ObjectMeta::check(const std::string& path, FieldErrors* errors) const {
  std::string p = join_path(path, "name");
  if (!name.empty() && is_dns_label(name) && !(name[0] >= 'a' && name[0] <= 'z')) {
    add(errors, p,
        "must start with a letter, because the job's Service is named after it (got \"" + name +
            "\")");
  }
  if (name.size() > kMaxJobName && is_dns_label(name)) {
    add(errors, p,
        "must be at most " + std::to_string(kMaxJobName) +
            " characters so that pod names like NAME-rollout-1234 fit in 63 (got " +
            std::to_string(name.size()) + ")");
  }
  if (!generate_name_ignored.empty()) {
    add(errors, join_path(path, "generateName"), "is not supported; set metadata.name instead");
  }
}

void ModelSpec::check(const std::string& p, FieldErrors* errors) const {
  if (!preset.empty() && !this->path.empty()) {
    add(errors, join_path(p, "path"),
        "set either preset or path, not both (preset \"" + preset + "\" would be ignored)");
  }
  if (this->path.empty() && format != "auto") {
    add(errors, join_path(p, "format"), "only applies to a checkpoint; set path too, or drop it");
  }
}

void DrafterRoleSpec::check(const std::string& path, FieldErrors* errors) const {
  if (min_replicas > max_replicas) {
    add(errors, join_path(path, "minReplicas"),
        "must be <= maxReplicas (" + std::to_string(max_replicas) + ") (got " +
            std::to_string(min_replicas) + ")");
    return;
  }
  if (replicas < min_replicas || replicas > max_replicas) {
    add(errors, join_path(path, "replicas"),
        "must lie between minReplicas and maxReplicas (" + std::to_string(min_replicas) + ".." +
            std::to_string(max_replicas) + ") (got " + std::to_string(replicas) + ")");
  }
}

void RLRolesSpec::check(const std::string& path, FieldErrors* errors) const {
  if (rollout.replicas < 1) {
    add(errors, join_path(path, "rollout.replicas"),
        "must be >= 1 (got " + std::to_string(rollout.replicas) + ")");
  }
  if (trainer.replicas < 1) {
    add(errors, join_path(path, "trainer.replicas"),
        "must be >= 1 (got " + std::to_string(trainer.replicas) + ")");
  }
}

void SelectorSpec::check(const std::string& path, FieldErrors* errors) const {
  std::string p = join_path(path, "buckets");
  if (buckets.empty()) {
    add(errors, p, "must list at least one bucket lower bound, starting with 1 (e.g. [1, 2, 5])");
    return;
  }
  if (buckets[0] != 1) {
    add(errors, index_path(p, 0),
        "must be 1 so that every batch size has a bucket (got " + std::to_string(buckets[0]) + ")");
  }
  for (size_t i = 1; i < buckets.size(); ++i) {
    if (buckets[i] <= buckets[i - 1]) {
      add(errors, index_path(p, i),
          "must be greater than the bucket before it (" + std::to_string(buckets[i - 1]) +
              ") (got " + std::to_string(buckets[i]) + ")");
    }
  }
}

void SpeculativeSpec::check(const std::string& path, FieldErrors* errors) const {
  std::string p = join_path(path, "arms");
  if (enabled && arms.empty()) {
    add(errors, p, "must list at least one arm when speculation is enabled (e.g. [\"8_4_16\"])");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < arms.size(); ++i) {
    Arm arm;
    std::string why;
    if (!parse_arm(arms[i], &arm, &why)) {
      add(errors, index_path(p, i), why + " (got \"" + arms[i] + "\")");
    } else if (!seen.insert(arms[i]).second) {
      add(errors, index_path(p, i), "repeats arm \"" + arms[i] + "\"; list each arm once");
    }
  }
}

void RebalancingSpec::check(const std::string& path, FieldErrors* errors) const {
  if (enabled && prometheus_url.empty()) {
    add(errors, join_path(path, "prometheusURL"),
        "is required when rebalancing is enabled; give the Prometheus base URL");
  }
  if (window.seconds < interval.seconds) {
    add(errors, join_path(path, "window"),
        "must be at least the interval (\"" + interval.text + "\") (got \"" + window.text + "\")");
  }
}

void TaskSpec::check(const std::string& p, FieldErrors* errors) const {
  if (!has_dataset()) {
    if (!dataset.held_out_path.empty()) {
      add(errors, join_path(p, "dataset.path"),
          "is required when dataset.heldOutPath is set; give the training file");
    }
    return;
  }
  if (!name.empty()) {
    add(errors, join_path(p, "name"),
        "a generated task (\"" + name + "\") and dataset.path exclude each other; drop one");
  }
  if (dataset.prompt_field.empty()) {
    add(errors, join_path(p, "dataset.promptField"), "must name the prompt's field");
  }
  if (dataset.answer_field.empty()) {
    add(errors, join_path(p, "dataset.answerField"), "must name the reference answer's field");
  }
  if (dataset.held_out_path.empty() && dataset.held_out < 1) {
    add(errors, join_path(p, "dataset.heldOut"),
        "must be >= 1, or set dataset.heldOutPath: a job needs held-out rows to report learning");
  }
}

void RewardSpec::check(const std::string& p, FieldErrors* errors) const {
  auto only = [&](bool set, const char* field, const char* for_type) {
    if (set && type != for_type) {
      add(errors, join_path(p, field),
          std::string("only applies to type ") + for_type + " (type is \"" + type + "\"); drop it");
    }
  };
  if (type == "regex" && pattern.empty()) {
    add(errors, join_path(p, "pattern"), "is required for type regex; give an ECMAScript pattern");
  }
  only(!pattern.empty(), "pattern", "regex");
  bool has_container = !container.image.empty();
  if (type == "command" && command.empty() && !has_container) {
    add(errors, join_path(p, "command"),
        "is required for type command; give the program and its arguments, e.g. "
        "[python3, reward.py], or a container with an image");
  }
  only(!command.empty(), "command", "command");
  only(has_container, "container", "command");
  if (type == "http" && url.empty()) {
    add(errors, join_path(p, "url"), "is required for type http; give the reward server's URL");
  }
  only(!url.empty(), "url", "http");
}

void RLJobSpec::check(const std::string& path, FieldErrors* errors) const {
  int32_t rollout = roles.rollout.replicas;
  if (drafter.training.enabled && rollout >= 1 && drafter.training.min_idle_workers > rollout) {
    add(errors, join_path(path, "drafter.training.minIdleWorkers"),
        "must be <= spec.roles.rollout.replicas (" + std::to_string(rollout) +
            "), or drafter training never starts (got " +
            std::to_string(drafter.training.min_idle_workers) + ")");
  }
  if (rebalancing.enabled && rollout >= 1 && rebalancing.min_rollout_replicas > rollout) {
    add(errors, join_path(path, "rebalancing.minRolloutReplicas"),
        "must be <= spec.roles.rollout.replicas (" + std::to_string(rollout) + ") (got " +
            std::to_string(rebalancing.min_rollout_replicas) + ")");
  }
  if (algorithm.prompts_per_step >= 1 && roles.trainer.replicas > algorithm.prompts_per_step) {
    add(errors, join_path(path, "roles.trainer.replicas"),
        "must be <= spec.algorithm.promptsPerStep (" + std::to_string(algorithm.prompts_per_step) +
            "): each trainer rank takes whole GRPO groups, one per prompt; lower it or raise "
            "promptsPerStep (got " +
            std::to_string(roles.trainer.replicas) + ")");
  }
  if (checkpoint.every_steps > 0 && checkpoint.path.empty()) {
    add(errors, join_path(path, "checkpoint.path"),
        "is required when checkpoint.everySteps is set; give a directory");
  }
}

void DataSpec::check(const std::string& path, FieldErrors* errors) const {
  if (corpus == "files" && paths.empty()) {
    add(errors, join_path(path, "paths"), "must list at least one text file when corpus is files");
  }
  if (corpus != "files" && !paths.empty()) {
    add(errors, join_path(path, "paths"),
        "only applies when corpus is files (corpus is \"" + corpus + "\"); drop it");
  }
}

void TrainingSpec::check(const std::string& path, FieldErrors* errors) const {
  if (schedule.warmup_steps >= steps) {
    add(errors, join_path(path, "schedule.warmupSteps"),
        "must be < steps (" + std::to_string(steps) + ") (got " +
            std::to_string(schedule.warmup_steps) + ")");
  }
}

void TSTPretrainJobSpec::check(const std::string& path, FieldErrors* errors) const {
  if (workers.replicas >= 1 && training.batch_size % workers.replicas != 0) {
    add(errors, join_path(path, "training.batchSize"),
        "must be divisible by spec.workers.replicas (" + std::to_string(workers.replicas) +
            ") so every worker gets the same share (got " + std::to_string(training.batch_size) +
            ")");
  }
  bool ratio_in_range = superposition.ratio > 0 && superposition.ratio < 1;
  if (superposition.enabled && ratio_in_range && training.schedule.warmup_steps < training.steps) {
    // The phase switch must fall in the stable part of warmup-stable-decay (SEEDS.md, TST).
    double switch_step = superposition.ratio * training.steps;
    double stable_end = training.steps * (1.0 - training.schedule.decay_fraction);
    if (switch_step < training.schedule.warmup_steps || switch_step > stable_end) {
      add(errors, join_path(path, "superposition.ratio"),
          "puts the switch to recovery at step " + format_number(std::round(switch_step)) +
              ", outside the stable part of the schedule (steps " +
              std::to_string(training.schedule.warmup_steps) + ".." +
              format_number(std::floor(stable_end)) +
              "); change ratio, warmupSteps or decayFraction");
    }
  }
  if (checkpoint.every_steps > 0 && checkpoint.path.empty()) {
    add(errors, join_path(path, "checkpoint.path"),
        "is required when checkpoint.everySteps is set; give a directory");
  }
}

}  // namespace tlt::api
