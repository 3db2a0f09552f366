// The CRD's CEL rules and syntax patterns (contracts: api/schema_rules.h).
#include "api/schema_rules.h"

#include "api/arm.h"

namespace tlt::api {
namespace {

using Json = nlohmann::ordered_json;

// "set and not empty", for optional strings (empty strings have no default).
std::string present(const std::string& field) {
  return "(has(self." + field + ") && self." + field + " != '')";
}

// An arm is "ngram", "ngram_D", "history" or "D_K_N" (api/arm.h: parse_arm). The numbers are read
// only after the syntax check, so int() sees nothing but digits, and arms are at most 16
// characters, so the numbers fit. (The apiserver's CEL has no cel.bind, hence the repeated split.)
constexpr const char* kArmSyntax = "^[0-9]+_[0-9]+_[0-9]+$";
constexpr const char* kNgramArmSyntax = "^ngram_[0-9]{1,4}$";  // parse_arm: 1 to 4 digits

// `condition` may use D, K and N; they are replaced by the parsed numbers of arm `var`.
std::string arm_ok(const std::string& var, std::string condition) {
  const char* names[] = {"D", "K", "N"};
  for (int i = 0; i < 3; ++i) {
    std::string value = "int(" + var + ".split('_')[" + std::to_string(i) + "])";
    for (size_t at = condition.find(names[i]); at != std::string::npos;
         at = condition.find(names[i], at + value.size())) {
      condition.replace(at, 1, value);
    }
  }
  return "(" + var + " == 'ngram' || !" + var + ".matches('" + kArmSyntax + "') || (" + condition +
         "))";
}

CelRule checkpoint_rule() {
  return {"self.checkpoint.everySteps == 0 || " + present("checkpoint.path"),
          "is required when checkpoint.everySteps is set; give a directory", "",
          ".checkpoint.path"};
}

// A RewardSpec field that only one type reads.
CelRule reward_only(const std::string& set, const std::string& field, const std::string& type) {
  std::string is_type = "(has(self.type) && self.type == '" + type + "')";
  return {"!" + set + " || " + is_type, "only applies to type " + type + "; drop it",
          "'only applies to type " + type +
              " (type is \"' + (has(self.type) ? self.type : '') + '\"); drop it'",
          "." + field};
}

}  // namespace

std::vector<CelRule> url_rules() {
  return {
      {"!self.matches(r'" + std::string(kUrlDotSegment) + "')",
       "has a \".\" or \"..\" segment in its path (%2e counts as \".\"), which servers resolve, "
       "so the URL reaches outside the prefix it names; write the path without it",
       "", ""},
      {"!self.matches(r'" + std::string(kUrlEncodedSlash) + "')",
       "has an encoded slash or a backslash (%2f, %5c or \\) before its query, which servers may "
       "read as \"/\"; write the path with plain \"/\"",
       "", ""},
  };
}

std::vector<CelRule> cel_rules(const ModelSpec&) {
  return {
      {"!(" + present("preset") + " && " + present("path") + ")",
       "set either preset or path, not both",
       "'set either preset or path, not both (preset \"' + self.preset + '\" would be ignored)'",
       ".path"},
      {"self.format == 'auto' || " + present("path"),
       "only applies to a checkpoint; set path too, or drop it", "", ".format"},
  };
}

std::vector<CelRule> cel_rules(const DrafterRoleSpec&) {
  return {
      {"self.minReplicas <= self.maxReplicas", "must be <= maxReplicas", "", ".minReplicas"},
      {"self.minReplicas > self.maxReplicas || "
       "(self.replicas >= self.minReplicas && self.replicas <= self.maxReplicas)",
       "must lie between minReplicas and maxReplicas", "", ".replicas"},
  };
}

std::vector<CelRule> cel_rules(const RLRolesSpec&) {
  return {
      {"self.rollout.replicas >= 1", "must be >= 1", "", ".rollout.replicas"},
      {"self.trainer.replicas >= 1", "must be >= 1", "", ".trainer.replicas"},
  };
}

std::vector<CelRule> cel_rules(const SelectorSpec&) {
  return {
      {"size(self.buckets) >= 1",
       "must list at least one bucket lower bound, starting with 1 (e.g. [1, 2, 5])", "",
       ".buckets"},
      {"size(self.buckets) == 0 || self.buckets[0] == 1",
       "must start with 1 so that every batch size has a bucket", "", ".buckets"},
      {"self.buckets.isSorted() && self.buckets.all(b, self.buckets.exists_one(c, c == b))",
       "must be strictly increasing: each bucket greater than the bucket before it", "",
       ".buckets"},
  };
}

std::vector<CelRule> cel_rules(const SpeculativeSpec&) {
  const std::string syntax = std::string("(a == 'ngram' || a == 'history' || a.matches('") +
                             kNgramArmSyntax + "') || a.matches('" + kArmSyntax + "'))";
  const std::string ranges = "D >= 1 && D <= 64 && K >= 1 && K <= 64 && N >= 1";
  const std::string tree = "N <= 1 + K + (D - 1) * K * K";
  const std::string ngram_depth = std::string("(!a.matches('") + kNgramArmSyntax +
                                  "') || (int(a.split('_')[1]) >= 1 && "
                                  "int(a.split('_')[1]) <= 64))";
  const std::string hint = std::string("each arm ") + arm_syntax_hint();  // as parse_arm says
  return {
      {"!self.enabled || size(self.arms) > 0",
       "must list at least one arm when speculation is enabled (e.g. [\"8_4_16\"])", "", ".arms"},
      {"self.arms.all(a, " + syntax + ")", hint,
       "'" + hint + " (got \"' + self.arms.filter(a, !" + syntax + ")[0] + '\")'", ".arms"},
      {"self.arms.all(a, " + ngram_depth + ")",
       "an n-gram arm drafts 1 to 64 tokens (\"ngram_1\" .. \"ngram_64\")",
       "'an n-gram arm drafts 1 to 64 tokens (got \"' + self.arms.filter(a, !" + ngram_depth +
           ")[0] + '\")'",
       ".arms"},
      {"self.arms.all(a, " + arm_ok("a", ranges) + ")",
       "each arm needs 1 <= depth <= 64, 1 <= topk <= 64 and verifyTokens >= 1",
       "'each arm needs 1 <= depth <= 64, 1 <= topk <= 64 and verifyTokens >= 1 (got \"' + "
       "self.arms.filter(a, !" +
           arm_ok("a", ranges) + ")[0] + '\")'",
       ".arms"},
      {"self.arms.all(a, " + arm_ok("a", tree) + ")",
       "an arm verifies more tokens than its depth_topk tree has (1 + k + (depth-1)*k*k); "
       "lower verifyTokens or raise depth/topk",
       "'arm \"' + self.arms.filter(a, !" + arm_ok("a", tree) +
           ")[0] + '\" verifies more tokens than its depth_topk tree has (1 + k + "
           "(depth-1)*k*k); lower verifyTokens or raise depth/topk'",
       ".arms"},
      {"self.arms.all(a, self.arms.exists_one(b, b == a))", "repeats an arm; list each arm once",
       "'repeats arm \"' + self.arms.filter(a, !self.arms.exists_one(b, b == a))[0] + '\"; "
       "list each arm once'",
       ".arms"},
  };
}

std::vector<CelRule> cel_rules(const RebalancingSpec&) {
  return {
      {"!self.enabled || " + present("prometheusURL"),
       "is required when rebalancing is enabled; give the Prometheus base URL", "",
       ".prometheusURL"},
      {"!self.window.matches(r'" + std::string(kDurationPattern) +
           "') || !self.interval.matches(r'" + kDurationPattern +
           "') || duration(self.window) >= duration(self.interval)",
       "must be at least the interval",
       "'must be at least the interval (\"' + self.interval + '\") (got \"' + self.window + "
       "'\")'",
       ".window"},
  };
}

std::vector<CelRule> cel_rules(const TaskSpec&) {
  const std::string dataset = present("dataset.path");
  return {
      {"!" + present("dataset.heldOutPath") + " || " + dataset,
       "is required when dataset.heldOutPath is set; give the training file", "", ".dataset.path"},
      {"!(" + present("name") + " && " + dataset + ")",
       "a generated task and dataset.path exclude each other; drop one",
       "'a generated task (\"' + self.name + '\") and dataset.path exclude each other; drop one'",
       ".name"},
      {"!" + dataset + " || self.dataset.promptField != ''", "must name the prompt's field", "",
       ".dataset.promptField"},
      {"!" + dataset + " || self.dataset.answerField != ''",
       "must name the reference answer's field", "", ".dataset.answerField"},
      {"!" + dataset + " || " + present("dataset.heldOutPath") + " || self.dataset.heldOut >= 1",
       "must be >= 1, or set dataset.heldOutPath: a job needs held-out rows to report learning", "",
       ".dataset.heldOut"},
  };
}

std::vector<CelRule> cel_rules(const RewardSpec&) {
  auto is_type = [](const std::string& t) {
    return "(has(self.type) && self.type == '" + t + "')";
  };
  const std::string command = "(has(self.command) && size(self.command) > 0)";
  const std::string container = present("container.image");
  return {
      {"!" + is_type("regex") + " || " + present("pattern"),
       "is required for type regex; give an ECMAScript pattern", "", ".pattern"},
      reward_only(present("pattern"), "pattern", "regex"),
      {"!" + is_type("command") + " || " + command + " || " + container,
       "is required for type command; give the program and its arguments, e.g. [python3, "
       "reward.py], or a container with an image",
       "", ".command"},
      reward_only(command, "command", "command"),
      reward_only(container, "container", "command"),
      {"!" + is_type("http") + " || " + present("url"),
       "is required for type http; give the reward server's URL", "", ".url"},
      reward_only(present("url"), "url", "http"),
  };
}

std::vector<CelRule> cel_rules(const RLJobSpec&) {
  return {
      {"!self.drafter.training.enabled || self.roles.rollout.replicas < 1 || "
       "self.drafter.training.minIdleWorkers <= self.roles.rollout.replicas",
       "must be <= spec.roles.rollout.replicas, or drafter training never starts", "",
       ".drafter.training.minIdleWorkers"},
      {"!self.rebalancing.enabled || self.roles.rollout.replicas < 1 || "
       "self.rebalancing.minRolloutReplicas <= self.roles.rollout.replicas",
       "must be <= spec.roles.rollout.replicas", "", ".rebalancing.minRolloutReplicas"},
      {"self.algorithm.promptsPerStep < 1 || "
       "self.roles.trainer.replicas <= self.algorithm.promptsPerStep",
       "must be <= spec.algorithm.promptsPerStep: each trainer rank takes whole GRPO groups, one "
       "per prompt; lower it or raise promptsPerStep",
       "", ".roles.trainer.replicas"},
      checkpoint_rule(),
  };
}

std::vector<CelRule> cel_rules(const DataSpec&) {
  return {
      {"self.corpus != 'files' || size(self.paths) > 0",
       "must list at least one text file when corpus is files", "", ".paths"},
      {"self.corpus == 'files' || size(self.paths) == 0",
       "only applies when corpus is files; drop it",
       "'only applies when corpus is files (corpus is \"' + self.corpus + '\"); drop it'",
       ".paths"},
  };
}

std::vector<CelRule> cel_rules(const TrainingSpec&) {
  return {
      {"self.schedule.warmupSteps < self.steps", "must be < steps", "", ".schedule.warmupSteps"},
  };
}

std::vector<CelRule> cel_rules(const TSTPretrainJobSpec&) {
  // The switch to recovery (ratio x steps) must fall in the stable part of warmup-stable-decay.
  const std::string sw = "(self.superposition.ratio * double(self.training.steps))";
  const std::string stable_end =
      "(double(self.training.steps) * (1.0 - self.training.schedule.decayFraction))";
  const std::string warmup = "double(self.training.schedule.warmupSteps)";
  return {
      {"self.workers.replicas < 1 || self.training.batchSize % self.workers.replicas == 0",
       "must be divisible by spec.workers.replicas so every worker gets the same share", "",
       ".training.batchSize"},
      {"!self.superposition.enabled || self.superposition.ratio <= 0.0 || "
       "self.superposition.ratio >= 1.0 || "
       "self.training.schedule.warmupSteps >= self.training.steps || (" +
           sw + " >= " + warmup + " && " + sw + " <= " + stable_end + ")",
       "puts the switch to recovery (step ratio x steps) outside the stable part of the "
       "schedule (steps warmupSteps..steps x (1 - decayFraction)); change ratio, warmupSteps or "
       "decayFraction",
       "", ".superposition.ratio"},
      checkpoint_rule(),
  };
}

// The apiserver itself already requires a name and a DNS subdomain.
std::vector<CelRule> metadata_rules() {
  return {
      {"self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
       "metadata.name must be a DNS label that starts with a letter (lower-case letters, digits "
       "and '-'), because the job's Service is named after it",
       "", ""},
      {"self.metadata.name.size() <= 47",
       "metadata.name must be at most 47 characters so that pod names like NAME-rollout-1234 "
       "fit in 63",
       "", ""},
      {"!has(self.metadata.generateName) || self.metadata.generateName == ''",
       "metadata.generateName is not supported; set metadata.name instead", "", ""},
  };
}

Json cel_json(const std::vector<CelRule>& rules) {
  Json out = Json::array();
  for (const CelRule& r : rules) {
    Json j;
    j["rule"] = r.rule;
    j["message"] = r.message;
    if (!r.message_expression.empty()) j["messageExpression"] = r.message_expression;
    if (!r.field_path.empty()) j["fieldPath"] = r.field_path;
    out.push_back(j);
  }
  return out;
}

}  // namespace tlt::api
