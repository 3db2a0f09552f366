// Job specification types for the two kinds tlt runs: RLJob and TSTPretrainJob
// (group tlt.dev, version v1alpha1).
//
// Every struct lists its fields once in `fields()` (see api/field.h): names as users write
// them in YAML, the rule each value must meet, and one line of documentation. Member
// initialisers are the defaults, so the defaults live here and nowhere else. Cross-field
// rules are in each struct's `check()`, implemented in api/validate.cc.
//
// Used by the runtime (from YAML files) and the operator (from the apiserver's JSON).
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/arm.h"
#include "api/field.h"

namespace tlt::api {

inline constexpr const char* kGroup = "tlt.dev";
inline constexpr const char* kVersion = "v1alpha1";
inline constexpr const char* kApiVersion = "tlt.dev/v1alpha1";
inline constexpr const char* kRLJobKind = "RLJob";
inline constexpr const char* kTSTPretrainJobKind = "TSTPretrainJob";

// ---------------------------------------------------------------------------------------------
// Kubernetes object metadata: the fields tlt reads; the others the apiserver sends are accepted
// and ignored (so objects read back from a cluster decode), and anything else is a typo.
struct ObjectMeta {
  std::string name;
  std::string namespace_;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::string creation_timestamp;
  std::string deletion_timestamp;
  std::vector<std::string> finalizers;
  Opaque owner_references_ignored, managed_fields_ignored;  // apiserver bookkeeping
  std::string generate_name_ignored;

  template <class V>
  void fields(V& v) {
    v("name", name, Rule().must().dns_label().doc("Job name; pod names derive from it."));
    v("namespace", namespace_, Rule().doc("Namespace (cluster mode); ignored by `tlt run`."));
    v("labels", labels, Rule().doc("Labels copied onto every pod of the job."));
    v("annotations", annotations, Rule().doc("Annotations of the job object."));
    v("uid", uid, Rule().doc("Set by the apiserver."));
    v("resourceVersion", resource_version, Rule().doc("Set by the apiserver."));
    v("generation", generation, Rule().doc("Set by the apiserver."));
    v("creationTimestamp", creation_timestamp, Rule().doc("Set by the apiserver."));
    v("deletionTimestamp", deletion_timestamp, Rule().doc("Set by the apiserver."));
    v("finalizers", finalizers, Rule().doc("Set by the operator."));
    v("ownerReferences", owner_references_ignored, Rule().doc("Set by Kubernetes."));
    v("managedFields", managed_fields_ignored, Rule().doc("Set by the apiserver."));
    v("generateName", generate_name_ignored, Rule().doc("Not supported: give a name."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

// ---------------------------------------------------------------------------------------------
// Shared pieces.

// The policy (RLJob) or the model being pretrained (TSTPretrainJob).
struct ModelSpec {
  std::string preset;  // "" means "tiny" unless a path is given; see effective_preset()
  std::string path;
  std::string format = "auto";
  std::string dtype = "auto";
  std::string device = "auto";

  template <class V>
  void fields(V& v) {
    v("preset", preset,
      Rule()
          .values({"", "micro", "tiny", "small"})
          .doc("Built-in architecture: micro (~0.4M parameters, CPU RL), tiny (~3M, tests) or "
               "small (~30M, benchmarks). Default tiny when no path is given."));
    v("path", path,
      Rule().doc("Model to load instead of a preset: a GGUF file, a Hugging Face directory "
                 "(config.json + safetensors), a config.json alone (that architecture from "
                 "scratch), or a tlt checkpoint (file or checkpoint directory)."));
    v("format", format,
      Rule()
          .values({"auto", "tlt", "gguf", "hf"})
          .doc("Format of path; auto looks at the file or directory."));
    v("dtype", dtype,
      Rule()
          .values({"auto", "float32", "bfloat16"})
          .doc("Precision of the model's matrix products in training (the RLJob policy "
               "update and drafter training, TST training) and in RLJob rollouts: bfloat16 is "
               "mixed precision "
               "(weights, gradients, optimizer state, activations, the KV cache and logits stay "
               "float32). Rollouts on CPUs decode with bfloat16 products through a row-invariant "
               "forward, so speculation still equals plain decoding token for token (a worker "
               "whose start-up probe finds otherwise decodes in float32); on GPUs they decode in "
               "float32. auto: "
               "bfloat16 for spec.model.path on hardware that multiplies bfloat16 natively "
               "(a CUDA device, taken to be Ampere or newer; CPUs with AVX512-BF16 or AMX), "
               "float32 otherwise (presets). float16 would "
               "need loss scaling, which tlt does not do."));
    v("device", device,
      Rule().device().doc(
          "Where every role computes: auto takes CUDA when the binary (the GPU flavour) and the "
          "machine have a device, else the CPU; cuda spreads a run's worker processes over the "
          "visible GPUs round-robin (a pod: the GPU its container was given); cuda:N puts every "
          "process on device N. cuda or cuda:N without a usable device fails at start, before "
          "any work, rather than run on the CPU."));
  }
  std::string effective_preset() const { return preset.empty() && path.empty() ? "tiny" : preset; }
  void check(const std::string& path, FieldErrors* errors) const;
};

// Kubernetes-style resource requests and limits of one pod, e.g.
// {requests: {cpu: "4", memory: 16Gi}, limits: {nvidia.com/gpu: "1"}}.
struct ResourceRequirements {
  std::map<std::string, Quantity> requests;
  std::map<std::string, Quantity> limits;

  template <class V>
  void fields(V& v) {
    v("requests", requests, Rule().doc("Resources the scheduler reserves for each pod."));
    v("limits", limits, Rule().doc("Upper bounds; put GPUs (nvidia.com/gpu) here."));
  }
};

// One role of a job: how many pods and what they look like.
struct RoleSpec {
  int32_t replicas = 1;
  ResourceRequirements resources;
  FreeForm pod_template;

  template <class V>
  void fields(V& v) {
    role_fields(v, Rule().ge(0).le(4096).doc("Pods that run this role."));
  }

 protected:
  // The table, with `replicas` under the role's own rule.
  template <class V>
  void role_fields(V& v, const Rule& replicas_rule) {
    v("replicas", replicas, replicas_rule);
    v("resources", resources, Rule().doc("Resources of each pod of this role."));
    v("podTemplate", pod_template,
      Rule().doc(
          "A PodTemplateSpec merged into each pod (nodeSelector, tolerations, volumes...)."));
  }
};

// The policy trainer's role: its pods are the ranks of one data-parallel group, GRPO groups
// kept whole on one rank, so a job uses at most algorithm.promptsPerStep of them
// (RLJobSpec::check).
struct TrainerRoleSpec : RoleSpec {
  template <class V>
  void fields(V& v) {
    role_fields(
        v, Rule().ge(0).le(4096).doc(
               "Policy trainer pods, the ranks of one data-parallel group (rank 0 coordinates); "
               "at most spec.algorithm.promptsPerStep, since each rank takes whole GRPO groups. "
               "A running job keeps the world it started with: a change takes effect when the "
               "job is suspended and resumed (condition TrainerScalePending)."));
  }
};

struct CheckpointSpec {
  std::string path;
  int32_t every_steps = 0;
  int32_t keep = 2;

  template <class V>
  void fields(V& v) {
    v("path", path, Rule().doc("Directory for checkpoints; empty keeps none."));
    v("everySteps", every_steps,
      Rule().ge(0).doc("Checkpoint every N steps; 0 only at the end and on SIGTERM."));
    v("keep", keep, Rule().ge(1).le(1000).doc("How many recent checkpoints to keep."));
  }
};

struct MetricsSpec {
  int32_t port = 9400;

  template <class V>
  void fields(V& v) {
    v("port", port,
      Rule().ge(0).le(65535).doc(
          "Port of each process's Prometheus /metrics endpoint; 0 turns it off."));
  }
};

// ---------------------------------------------------------------------------------------------
// RLJob.

// Prompts and reference answers read from the user's files (spec.task.dataset). The names are a
// contract that manifests outside the project use.
struct DatasetSpec {
  std::string path;
  std::string prompt_field = "prompt";
  std::string answer_field = "answer";
  int32_t held_out = 64;
  std::string held_out_path;
  std::string long_prompts = "skip";

  template <class V>
  void fields(V& v) {
    v("path", path,
      Rule().doc("A .jsonl or .parquet file of one problem per row, or a directory of such shards "
                 "(read in name order). Unset: the task is generated (spec.task.name). On a "
                 "cluster the path is inside the pod: mount the data as a volume (a PVC or an "
                 "init container's emptyDir) through the roles' podTemplate."));
    v("promptField", prompt_field,
      Rule().at_most_chars(256).doc(
          "Field of a row holding the prompt, a dotted path into nested objects "
          "(\"extra.question\"): a string (one user turn of the model's chat template) or a "
          "list of chat messages [{role, content}] rendered as it is."));
    v("answerField", answer_field,
      Rule().at_most_chars(256).doc(
          "Field of a row holding the reference answer handed to the reward (any JSON value; a "
          "dotted path, e.g. reward_model.ground_truth)."));
    v("heldOut", held_out,
      Rule().ge(0).le(1000000).doc(
          "Rows held out for evaluation, chosen by a hash of the row and spec.task.seed (never "
          "trained on). With heldOutPath: how many of that file's rows are evaluated (all of "
          "them when it holds fewer)."));
    v("heldOutPath", held_out_path,
      Rule().doc("A second file (or directory) of held-out rows, in the same format."));
    v("longPrompts", long_prompts,
      Rule()
          .values({"skip", "truncate", "fail"})
          .doc("A prompt longer than the model's context allows (its KV budget less "
               "spec.algorithm.maxResponseTokens): skip the row, truncate the prompt from its "
               "start (keeping the question's end), or fail the job. Counted in the report."));
  }
};

struct TaskSpec {
  std::string name;  // "" means arithmetic-cot unless a dataset is given; see effective_name()
  int64_t seed = 1;
  int32_t held_out = 256;
  std::string answer = "auto";  // see free_text_answer()
  DatasetSpec dataset;

  template <class V>
  void fields(V& v) {
    v("name", name,
      Rule()
          .values({"", "arithmetic-cot", "countdown"})
          .doc("Generated task with a verifiable reward: multi-step arithmetic with a written "
               "chain of thought (heavy-tailed lengths) or Countdown. Default arithmetic-cot "
               "unless spec.task.dataset.path is set (then leave it unset)."));
    v("seed", seed,
      Rule().ge(0).doc("Seed of the problem generator, or of a dataset's held-out split and "
                       "per-epoch shuffle."));
    v("heldOut", held_out,
      Rule().ge(0).le(1000000).doc(
          "Generated problems held out for evaluation (never trained on); a dataset uses "
          "spec.task.dataset.heldOut."));
    v("answer", answer,
      Rule()
          .values({"auto", "marker", "free-text"})
          .doc("Where a generated task's reward reads a response's final answer: only after a "
               "marker "
               "(\"Answer:\", \"the answer is\", \"####\", \\boxed{}; marker), or, when "
               "no marker is present, also from free text (free-text: arithmetic-cot's last "
               "number, countdown's expression before the last \"=\"). auto: free-text for "
               "spec.model.path, marker for a preset."));
    v("dataset", dataset, Rule().doc("Prompts and answers from files instead of a generator."));
  }
  // name, or arithmetic-cot when it and the dataset path are unset; "" for a dataset task.
  std::string effective_name() const {
    return !name.empty() ? name : dataset.path.empty() ? "arithmetic-cot" : "";
  }
  bool has_dataset() const { return !dataset.path.empty(); }
  // Whether the reward reads free text (answer, with auto resolved by whether a model path is set).
  bool free_text_answer(bool model_path) const {
    return answer == "free-text" || (answer == "auto" && model_path);
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

// The container that runs a command reward on a cluster: a sidecar of the trainer pod. The
// operator writes the rest of it (a restricted security context, the shared volume it talks
// through), so an author chooses only what is listed here.
struct RewardContainer {
  std::string image;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  ResourceRequirements resources;

  template <class V>
  void fields(V& v) {
    v("image", image, Rule().at_most_chars(1024).doc("The image holding the reward program."));
    v("command", command,
      Rule().at_most_items(256).doc("Its command; default spec.reward.command."));
    v("env", env, Rule().doc("Environment variables of the reward container."));
    v("resources", resources, Rule().doc("Resources of the reward container."));
  }
};

// How a response is scored (spec.reward). Built-in verifiers run in the trainer; `command` runs
// the user's program (locally a child process, on a cluster a sidecar of the trainer pod), `http`
// posts to a URL the cluster admin allows. The wire format of command and http: one JSON object
// per response {"id", "prompt", "response", "answer"} in, {"id", "reward": <number>} out.
struct RewardSpec {
  std::string type;  // "" means the generated task's own reward, or math for a dataset
  double relative_tolerance = 1e-6;
  double absolute_tolerance = 0.0;
  std::string pattern;
  std::vector<std::string> command;
  RewardContainer container;
  std::string url;
  std::vector<std::string> row_fields;  // "fields": fields() is the table below
  Duration timeout = Duration::of("30s");
  Duration startup_timeout = Duration::of("120s");
  int32_t retries = 2;
  int32_t concurrency = 8;

  template <class V>
  void fields(V& v) {
    v("type", type,
      Rule()
          .values({"", "exact", "numeric", "math", "regex", "command", "http"})
          .doc("exact (normalised string), numeric (numbers within the tolerances), math (the "
               "final answer after \\boxed{}, ####, \"The answer is\", LaTeX-lite "
               "normalised), regex (pattern), command (your program on JSON lines), http (a "
               "URL). Unset: the generated task's own reward, or math for a dataset."));
    v("relativeTolerance", relative_tolerance,
      Rule().ge(0).lt(1).doc("numeric and math: relative tolerance of a numeric comparison."));
    v("absoluteTolerance", absolute_tolerance,
      Rule().ge(0).doc("numeric and math: absolute tolerance of a numeric comparison."));
    v("pattern", pattern,
      Rule().at_most_chars(4096).doc(
          "regex: an ECMAScript pattern searched for in the response; with a capture group, "
          "group 1 must equal the answer."));
    v("command", command,
      Rule().at_most_items(256).doc(
          "command: the program and its arguments, started once per run; it reads one JSON "
          "object per line on stdin and writes {\"id\", \"reward\"} lines on stdout "
          "(any order). On a cluster it runs in the reward container (container)."));
    v("container", container,
      Rule().doc("command on a cluster: the container run as a sidecar of the trainer pod, "
                 "talking JSON lines with the trainer through a shared volume. Its security "
                 "context is the operator's (restricted)."));
    v("url", url,
      Rule().url().doc("http: where each response is POSTed; must be allowed by the operator's "
                       "--reward-url-allow (cluster) or be any http(s) URL (tlt run)."));
    v("fields", row_fields,
      Rule().at_most_items(32).at_most_chars(256).doc(
          "command and http on a dataset: more of the row in each request, each field (a dotted "
          "path, e.g. data_source, extra_info) under its own name (null where a row lacks it), or "
          "\"*\": the whole row, under \"row\"."));
    v("timeout", timeout,
      Rule().gt(0).doc("command and http: longest wait for one response's reward before a retry."));
    v("startupTimeout", startup_timeout,
      Rule().gt(0).doc("command: longest wait for the program's first reward after it starts "
                       "(imports, loading a model), when longer than timeout."));
    v("retries", retries,
      Rule().ge(0).le(10).doc(
          "command and http: retries of a failed or late reward (a restarted command, a new "
          "request) before the step fails and the job keeps its last checkpoint."));
    v("concurrency", concurrency,
      Rule().ge(1).le(256).doc("http: requests in flight at once."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

struct AlgorithmSpec {
  std::string type = "grpo";
  int32_t steps = 20;
  int32_t prompts_per_step = 8;
  int32_t group_size = 4;
  int32_t max_response_tokens = 256;
  double temperature = 1.0;
  double top_p = 1.0;
  double learning_rate = 1e-5;
  double kl_coef = 0.0;
  double clip_ratio = 0.2;
  std::string loss_aggregation = "token";
  int64_t seed = 0;
  int32_t warm_start_steps = -1;  // see effective_warm_start_steps()
  double warm_start_learning_rate = 2e-3;
  int32_t warm_start_max_prompt_chars = 64;
  double warm_start_unmarked_answers = 0.0;

  template <class V>
  void fields(V& v) {
    v("type", type, Rule().values({"grpo"}).doc("RL algorithm."));
    v("steps", steps, Rule().ge(1).doc("RL steps (rollout + policy update)."));
    v("promptsPerStep", prompts_per_step, Rule().ge(1).doc("Prompts sampled per step."));
    v("groupSize", group_size,
      Rule().ge(2).le(1024).doc(
          "Responses per prompt; advantages are normalised within a group, so at least 2."));
    v("maxResponseTokens", max_response_tokens,
      Rule().ge(1).le(131072).doc("Longest response generated."));
    v("temperature", temperature, Rule().gt(0).le(10).doc("Rollout sampling temperature."));
    v("topP", top_p, Rule().gt(0).le(1).doc("Nucleus sampling mass."));
    v("learningRate", learning_rate, Rule().gt(0).lt(1).doc("Policy learning rate."));
    v("klCoef", kl_coef, Rule().ge(0).le(100).doc("Weight of the KL penalty to the reference."));
    v("clipRatio", clip_ratio, Rule().gt(0).lt(1).doc("PPO-style ratio clip epsilon."));
    v("lossAggregation", loss_aggregation,
      Rule()
          .values({"token", "sequence"})
          .doc("How the GRPO loss averages: over all response tokens of a minibatch (token), or "
               "per response, then over responses (sequence: each response weighs the same)."));
    v("seed", seed, Rule().ge(0).doc("Seed of sampling and initialisation."));
    v("warmStartSteps", warm_start_steps,
      Rule().ge(-1).le(1000000).doc(
          "Supervised steps on the task's worked solutions before RL (cached; 0: none). -1: 300 "
          "for a preset, none for spec.model.path (a trained chat model starts RL as it is)."));
    v("warmStartLearningRate", warm_start_learning_rate,
      Rule().gt(0).lt(1).doc("Learning rate of the supervised warm start."));
    v("warmStartMaxPromptChars", warm_start_max_prompt_chars,
      Rule().ge(1).le(1000000).doc(
          "The warm start imitates only problems whose prompt has at most this many characters: "
          "the default teaches the format on short problems; a larger value also teaches long "
          "chains, so the policy writes a long tail from the start."));
    v("warmStartUnmarkedAnswers", warm_start_unmarked_answers,
      Rule().ge(0).le(1).doc(
          "Share of the warm start's worked solutions written without the \"Answer:\" marker "
          "before their final answer, as many solutions in the wild are. Where the reward reads "
          "only marked answers (spec.task.answer: marker, a preset's default), RL must teach the "
          "policy to mark them, which pays on every problem: the embedded default uses 0.5 to "
          "show RL learning in minutes. 0: every solution marks its answer."));
  }
  // warm_start_steps, or when it is -1 (unset): 300 for a preset, 0 for a model path.
  int32_t effective_warm_start_steps(bool model_path) const {
    return warm_start_steps >= 0 ? warm_start_steps : model_path ? 0 : 300;
  }
};

struct DrafterRoleSpec {
  int32_t replicas = 0;
  int32_t min_replicas = 0;
  int32_t max_replicas = 2;
  ResourceRequirements resources;
  FreeForm pod_template;

  template <class V>
  void fields(V& v) {
    v("replicas", replicas,
      Rule().ge(0).le(4096).doc(
          "Dedicated drafter-training pods (idle rollout pods train the drafter too)."));
    v("minReplicas", min_replicas,
      Rule().ge(0).le(4096).doc("Fewest dedicated drafter pods the rebalancer keeps."));
    v("maxReplicas", max_replicas,
      Rule().ge(0).le(4096).doc("Most dedicated drafter pods the rebalancer may add."));
    v("resources", resources, Rule().doc("Resources of each drafter pod."));
    v("podTemplate", pod_template, Rule().doc("A PodTemplateSpec merged into each drafter pod."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

struct RLRolesSpec {
  RoleSpec rollout{2, {}, {}};
  TrainerRoleSpec trainer;
  DrafterRoleSpec drafter;

  template <class V>
  void fields(V& v) {
    v("rollout", rollout, Rule().doc("Rollout workers (generation; idle ones train the drafter)."));
    v("trainer", trainer, Rule().doc("Policy trainer."));
    v("drafter", drafter, Rule().doc("Dedicated drafter trainers."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

struct SelectorSpec {
  std::string type = "bucketed-epsilon-greedy";
  double epsilon = 0.1;
  std::vector<int32_t> buckets{1, 2, 5, 21};
  int32_t window = 32;
  std::string value = "throughput";
  std::string exploration = "uniform";
  bool pooled = true;

  template <class V>
  void fields(V& v) {
    v("type", type,
      Rule()
          .values({"bucketed-epsilon-greedy", "fixed"})
          .doc("How an arm is chosen per batch: a bandit per batch-size bucket, or always the "
               "first."));
    v("epsilon", epsilon, Rule().ge(0).le(1).doc("Exploration rate of the bandit."));
    v("buckets", buckets,
      Rule().at_most_items(64).doc(
          "Lower bounds of the batch-size buckets, strictly increasing, starting at 1."));
    v("window", window, Rule().ge(1).le(100000).doc("Steps kept per arm and batch-size bucket."));
    v("value", value,
      Rule()
          .values({"throughput", "median"})
          .doc("How an arm's kept steps are valued: their tokens over their seconds, leaving out "
               "steps slower than 4x the median step (throughput), or the median of each step's "
               "tokens/s (median), which undervalues all-or-nothing drafts such as n-grams."));
    v("exploration", exploration,
      Rule()
          .values({"uniform", "weighted"})
          .doc("Which arm an exploration step (a share epsilon of steps) tries: any arm alike "
               "(uniform), or arms in proportion to their value, so an arm at half the best "
               "one's throughput is tried half as often (weighted)."));
    v("pooled", pooled,
      Rule().doc("Rollout workers share what their bandits measured: before each step a worker "
                 "counts the other workers' steps of the previous one as its own, and the "
                 "workers try different arms first, so a trial one made need not be repeated by "
                 "the others. Turn it off where workers run on unlike hardware, whose step "
                 "times do not compare."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

struct SpeculativeSpec {
  bool enabled = true;
  int32_t activation_threshold = 32;
  std::vector<std::string> arms{"8_4_48", "8_4_32", "8_4_16", "8_4_8"};
  int32_t ngram_shortcut = 3;
  double draft_confidence = 0.0;
  int32_t drafter_catch_up_limit = 8;
  SelectorSpec selector;

  template <class V>
  void fields(V& v) {
    v("enabled", enabled, Rule().doc("Speculative decoding in rollouts."));
    v("activationThreshold", activation_threshold,
      Rule().ge(1).doc(
          "Speculate only while at most this many requests are active (the long tail)."));
    v("arms", arms,
      Rule().at_most_items(64).at_most_chars(16).doc(
          "Drafting strategies: \"depth_topk_verifyTokens\" (top-k 1 = chain), \"ngram\" (up to 8 "
          "tokens copied from the request's context), \"ngram_D\" (up to D) or \"history\" (a "
          "tree of what followed in responses already finished for the same prompt)."));
    v("ngramShortcut", ngram_shortcut,
      Rule().ge(0).le(64).doc(
          "Drafter arms copy a request's draft from its own context when its last this-many "
          "tokens occurred before (no drafter forward); 0 turns it off."));
    v("draftConfidence", draft_confidence,
      Rule().ge(0).le(1).doc(
          "Verify a drafted token only when the drafter's estimate that its whole path is "
          "accepted reaches this (chains end, trees lose paths); fewer tokens per verify where "
          "its cost grows with them. Exact for greedy and sampled requests; 0 verifies all."));
    v("drafterCatchUpLimit", drafter_catch_up_limit,
      Rule().ge(0).le(1000000).doc(
          "The most of a request's newest positions the drafter catches up on when it runs "
          "after plain, n-gram or copied steps (older ones are skipped; outputs do not change); "
          "0 keeps all."));
    v("selector", selector, Rule().doc("How an arm is picked per batch."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

struct DrafterTrainingSpec {
  bool enabled = true;
  double learning_rate = 3e-4;
  int32_t min_idle_workers = 1;
  int32_t buffer_steps = 2;
  int32_t batch_size = 32;

  template <class V>
  void fields(V& v) {
    v("enabled", enabled, Rule().doc("Train the drafter online on idle workers."));
    v("learningRate", learning_rate, Rule().gt(0).lt(1).doc("Drafter learning rate."));
    v("minIdleWorkers", min_idle_workers,
      Rule().ge(1).doc("Idle workers needed before drafter training starts."));
    v("bufferSteps", buffer_steps,
      Rule().ge(1).le(64).doc("RL steps of hidden states kept for drafter training."));
    v("batchSize", batch_size, Rule().ge(1).le(65536).doc("Sequences per drafter update."));
  }
};

struct DrafterSpec {
  int32_t layers = 1;
  int32_t vocab_subset = 0;
  int32_t warm_start_steps = 200;
  int32_t warm_start_prompts = 64;
  int32_t train_levels = 3;
  std::string features = "last";
  DrafterTrainingSpec training;

  template <class V>
  void fields(V& v) {
    v("layers", layers, Rule().ge(1).le(8).doc("Decoder layers of the EAGLE-style drafter."));
    v("vocabSubset", vocab_subset,
      Rule().ge(0).doc(
          "Drafter LM head over the N most frequent tokens (0 = full vocabulary). The target "
          "still verifies over the full vocabulary, so output stays lossless."));
    v("warmStartSteps", warm_start_steps,
      Rule().ge(0).le(1000000).doc(
          "Drafter training steps on the warm-start policy's hidden states over the task's "
          "worked solutions before RL, so the first steps already accept drafts (cached; 0: the "
          "drafter starts untrained)."));
    v("warmStartPrompts", warm_start_prompts,
      Rule().ge(1).le(100000).doc(
          "With spec.model.path: how many of the task's training problems the model answers for "
          "the drafter's warm start, which trains on those generations (cached). More prompts "
          "give the drafter more of the model's own text to imitate (longer accepted drafts) at "
          "the cost of a longer first run; presets ignore it."));
    v("trainLevels", train_levels,
      Rule().ge(1).le(8).doc(
          "Drafting levels the drafter's training unrolls, in the warm start and online: from "
          "level 2 of a chain on, drafting feeds the drafter its own predicted hidden state, and "
          "training on that input as well keeps deeper drafts accepted (on SmolLM2, 3 levels "
          "accepted 11% more tokens per verification than 1). 1 trains on the target's hidden "
          "states only; each level adds about one drafter forward and backward to a step."));
    v("features", features,
      Rule()
          .values({"last", "fused"})
          .doc("What the drafter reads of the target at each position. last: its final hidden "
               "state (EAGLE-1/2; trained with hidden-state regression). fused: the outputs of a "
               "low, a middle and the final layer, fused (EAGLE-3; the target exports them from "
               "the same forward, and training optimises the tokens' cross-entropy through the "
               "unrolled trainLevels levels, so set trainLevels >= 2). A drafter checkpoint of the "
               "other kind is refused."));
    v("training", training, Rule().doc("Online drafter training."));
  }
};

struct RebalancingSpec {
  bool enabled = false;
  double idle_below = 0.05;
  Duration window = Duration::of("60s");
  Duration interval = Duration::of("15s");
  std::string metric = "tlt_gpu_busy_ratio";
  std::string pod_label = "pod";
  std::string prometheus_url;
  int32_t min_rollout_replicas = 1;

  template <class V>
  void fields(V& v) {
    v("enabled", enabled, Rule().doc("Let the operator move idle rollout pods to drafting."));
    v("idleBelow", idle_below,
      Rule().ge(0).le(1).doc(
          "A pod whose GPU busy ratio stays below this over the window counts as idle."));
    v("window", window, Rule().gt(0).doc("How long a pod must stay idle."));
    v("interval", interval, Rule().gt(0).doc("How often the rebalancer looks."));
    v("metric", metric,
      Rule()
          .values({"tlt_gpu_busy_ratio", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"})
          .doc("Utilisation metric: the runtime's own gauge or DCGM's."));
    v("podLabel", pod_label,
      Rule()
          .values({"pod", "exported_pod"})
          .doc("Label that names the pod in the metric (DCGM exporters often use exported_pod)."));
    v("prometheusURL", prometheus_url,
      Rule().url().doc("Prometheus base URL, e.g. http://prometheus.monitoring:9090."));
    v("minRolloutReplicas", min_rollout_replicas,
      Rule().ge(1).doc("Rollout pods never reassigned, so generation keeps this capacity."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

// What an RL run writes to its report directory besides its figures (runtime/report/job_report.h).
struct ReportSpec {
  int32_t samples = 64;

  template <class V>
  void fields(V& v) {
    v("samples", samples,
      Rule().ge(0).doc(
          "Record one scored response in this many in the report's samples.jsonl (step, prompt "
          "as rendered, response, the answer handed to the reward, reward, length, finish "
          "reason; the held-out evaluations' too): 1 records every response, 0 none. A step "
          "writes promptsPerStep x groupSize / samples rows of about 300 bytes plus the prompt's "
          "and the response's text (about 4 bytes a token): at 64, a step of 128 x 8 responses "
          "writes 16 rows, at most about 0.5 MB when every response runs to 8192 tokens."));
  }
};

struct RLJobSpec {
  ModelSpec model;
  TaskSpec task;
  RewardSpec reward;
  AlgorithmSpec algorithm;
  RLRolesSpec roles;
  SpeculativeSpec speculative;
  DrafterSpec drafter;
  RebalancingSpec rebalancing;
  CheckpointSpec checkpoint;
  MetricsSpec metrics;
  ReportSpec report;
  bool suspend = false;
  int32_t backoff_limit = 3;
  std::optional<int64_t> ttl_seconds_after_finished;

  template <class V>
  void fields(V& v) {
    v("model", model,
      Rule().fixed().doc("The policy model (immutable: checkpoints depend on it)."));
    v("task", task, Rule().fixed().doc("The RL task: its prompts and answers (immutable)."));
    v("reward", reward, Rule().fixed().doc("How responses are scored (immutable)."));
    v("algorithm", algorithm, Rule().doc("GRPO hyper-parameters."));
    v("roles", roles, Rule().doc("Pods per role."));
    v("speculative", speculative, Rule().doc("Speculative decoding in the rollouts."));
    v("drafter", drafter, Rule().doc("The drafter and its online training."));
    v("rebalancing", rebalancing, Rule().doc("Cluster-level idle-GPU rebalancing."));
    v("checkpoint", checkpoint, Rule().doc("Checkpoints of policy and drafter."));
    v("metrics", metrics, Rule().doc("Prometheus endpoint of the job's processes."));
    v("report", report, Rule().doc("What the run's report directory records."));
    v("suspend", suspend, Rule().doc("true deletes the pods and keeps the job; false resumes."));
    v("backoffLimit", backoff_limit,
      Rule().ge(0).le(1000).doc("Pod failures tolerated before the job is Failed."));
    v("ttlSecondsAfterFinished", ttl_seconds_after_finished,
      Rule().ge(0).doc("Delete the finished job after this many seconds; unset keeps it."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

// ---------------------------------------------------------------------------------------------
// Status (written by the operator, read back by it and by `kubectl get`).

struct Condition {
  std::string type;     // Created, Running, Suspended, Succeeded, Failed, RebalancerDegraded
  std::string status;   // True, False, Unknown
  std::string reason;   // CamelCase machine-readable
  std::string message;  // a sentence for people
  std::string last_transition_time;
  int64_t observed_generation = 0;

  template <class V>
  void fields(V& v) {
    v("type", type, Rule().doc("Condition type."));
    v("status", status, Rule().values({"True", "False", "Unknown"}).doc("Condition status."));
    v("reason", reason, Rule().doc("Machine-readable reason."));
    v("message", message, Rule().doc("Human-readable message."));
    v("lastTransitionTime", last_transition_time, Rule().doc("RFC 3339 time."));
    v("observedGeneration", observed_generation, Rule().doc("Generation this refers to."));
  }
};

struct RoleStatus {
  int32_t replicas = 0, ready = 0, succeeded = 0, failed = 0;
  template <class V>
  void fields(V& v) {
    v("replicas", replicas, Rule().doc("Pods that exist."));
    v("ready", ready, Rule().doc("Pods running and ready."));
    v("succeeded", succeeded, Rule().doc("Pods that finished."));
    v("failed", failed, Rule().doc("Pods that failed."));
  }
};

struct RLRolesStatus {
  RoleStatus rollout, trainer, drafter;
  template <class V>
  void fields(V& v) {
    v("rollout", rollout, Rule().doc("Rollout pods."));
    v("trainer", trainer, Rule().doc("Trainer pods."));
    v("drafter", drafter, Rule().doc("Drafter pods."));
  }
};

struct DrafterStatus {
  int64_t version = 0;
  double accept_length = 0.0;
  template <class V>
  void fields(V& v) {
    v("version", version, Rule().doc("Drafter weights version in use."));
    v("acceptLength", accept_length, Rule().doc("Mean accepted tokens per verification."));
  }
};

struct RLJobStatus {
  std::string phase;  // Pending, Running, Blocked, Suspended, Queued, Succeeded, Failed
  int64_t observed_generation = 0;
  int32_t step = 0;
  double reward = 0.0;
  std::vector<Condition> conditions;
  RLRolesStatus roles;
  DrafterStatus drafter;
  double reclaimed_gpu_seconds = 0.0;
  double idle_gpu_seconds = 0.0;
  int32_t restarts = 0;
  std::string start_time, completion_time;

  template <class V>
  void fields(V& v) {
    v("phase", phase,
      Rule().doc("Pending, Running, Blocked, Suspended, Queued (waiting for Kueue to admit the "
                 "job's Workload: no pods until then; docs/kueue.md), Succeeded or Failed."));
    v("observedGeneration", observed_generation, Rule().doc("Spec generation reconciled."));
    v("step", step, Rule().doc("Last completed RL step."));
    v("reward", reward, Rule().doc("Mean reward of the last step."));
    v("conditions", conditions, Rule().doc("Conditions."));
    v("roles", roles, Rule().doc("Pods per role."));
    v("drafter", drafter, Rule().doc("Drafter version and quality."));
    v("reclaimedGPUSeconds", reclaimed_gpu_seconds,
      Rule().doc("Idle GPU-seconds turned into drafter training."));
    v("idleGPUSeconds", idle_gpu_seconds, Rule().doc("GPU-seconds rollout workers sat idle."));
    v("restarts", restarts, Rule().doc("Pod restarts counted against backoffLimit."));
    v("startTime", start_time, Rule().doc("When the job started running."));
    v("completionTime", completion_time, Rule().doc("When the job finished."));
  }
};

// ---------------------------------------------------------------------------------------------
// TSTPretrainJob.

struct TokenizerSpec {
  std::string type = "bpe";
  int32_t vocab_size = 4096;
  std::string path;

  template <class V>
  void fields(V& v) {
    v("type", type, Rule().values({"bpe"}).doc("Tokenizer model (sentencepiece BPE)."));
    v("vocabSize", vocab_size, Rule().ge(256).le(262144).doc("Vocabulary size when training."));
    v("path", path,
      Rule().doc("A tokenizer to use instead of training one: a sentencepiece model, or a Hugging "
                 "Face tokenizer.json (a path ending in .json). Default: the model's own when "
                 "spec.model.path has one."));
  }
};

struct DataSpec {
  std::string corpus = "sotu";
  std::vector<std::string> paths;
  TokenizerSpec tokenizer;
  double held_out_fraction = 0.05;

  template <class V>
  void fields(V& v) {
    v("corpus", corpus,
      Rule()
          .values({"sotu", "kjv", "files"})
          .doc("Packaged corpus (State of the Union speeches, King James Bible) or your own "
               "files."));
    v("paths", paths, Rule().doc("Text files, one document each, when corpus is files."));
    v("tokenizer", tokenizer, Rule().doc("Tokenizer."));
    v("heldOutFraction", held_out_fraction,
      Rule().gt(0).le(0.5).doc("Share of documents held out for evaluation."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

struct ScheduleSpec {
  int32_t warmup_steps = 100;
  double decay_fraction = 0.2;

  template <class V>
  void fields(V& v) {
    v("warmupSteps", warmup_steps, Rule().ge(0).doc("Linear warmup steps."));
    v("decayFraction", decay_fraction,
      Rule().ge(0).lt(1).doc(
          "Final share of steps with linear decay to zero (warmup-stable-decay)."));
  }
};

struct TrainingSpec {
  int32_t steps = 1000;
  int32_t seq_len = 256;
  int32_t batch_size = 16;
  double learning_rate = 1e-3;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  int64_t seed = 0;
  ScheduleSpec schedule;
  int32_t eval_every_steps = 100;
  int32_t eval_batches = 8;

  template <class V>
  void fields(V& v) {
    v("steps", steps, Rule().ge(1).doc("Optimizer steps, both phases together."));
    v("seqLen", seq_len, Rule().ge(2).le(65536).doc("Positions per sequence."));
    v("batchSize", batch_size, Rule().ge(1).doc("Global sequences per step."));
    v("learningRate", learning_rate, Rule().gt(0).lt(1).doc("Peak learning rate (AdamW)."));
    v("weightDecay", weight_decay, Rule().ge(0).le(1).doc("AdamW weight decay."));
    v("gradClip", grad_clip, Rule().ge(0).doc("Gradient-norm clip; 0 turns it off."));
    v("seed", seed, Rule().ge(0).doc("Seed of initialisation and data order."));
    v("schedule", schedule, Rule().doc("Warmup-stable-decay learning-rate schedule."));
    v("evalEverySteps", eval_every_steps,
      Rule().ge(0).doc("Held-out next-token loss every N steps; 0 only at the end."));
    v("evalBatches", eval_batches, Rule().ge(1).doc("Batches per evaluation."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

struct SuperpositionSpec {
  bool enabled = true;
  int32_t bag_size = 6;
  double ratio = 0.3;
  std::string weighting = "uniform";

  template <class V>
  void fields(V& v) {
    v("enabled", enabled, Rule().doc("false runs the plain next-token baseline."));
    v("bagSize", bag_size,
      Rule().ge(1).le(64).doc(
          "Tokens per bag s: each position reads the mean embedding of s tokens."));
    v("ratio", ratio,
      Rule().gt(0).lt(1).doc(
          "Share r of steps in the superposition phase; recovery follows at step r x steps."));
    v("weighting", weighting,
      Rule()
          .values({"uniform", "power-law"})
          .doc("Weights of the s cross-entropies inside a bag."));
  }
};

struct WorkersSpec {
  int32_t replicas = 1;
  ResourceRequirements resources;
  FreeForm pod_template;

  template <class V>
  void fields(V& v) {
    v("replicas", replicas, Rule().ge(1).le(4096).doc("Data-parallel worker pods."));
    v("resources", resources, Rule().doc("Resources of each worker pod."));
    v("podTemplate", pod_template, Rule().doc("A PodTemplateSpec merged into each worker pod."));
  }
};

struct TSTPretrainJobSpec {
  ModelSpec model;
  DataSpec data;
  TrainingSpec training;
  SuperpositionSpec superposition;
  WorkersSpec workers;
  CheckpointSpec checkpoint;
  MetricsSpec metrics;
  bool suspend = false;
  int32_t backoff_limit = 3;
  std::optional<int64_t> ttl_seconds_after_finished;

  template <class V>
  void fields(V& v) {
    v("model", model,
      Rule().fixed().doc("The model to pretrain (immutable: checkpoints depend on it)."));
    v("data", data,
      Rule().fixed().doc("Corpus and tokenizer (immutable: the stream position depends on them)."));
    v("training", training, Rule().doc("Optimisation."));
    v("superposition", superposition, Rule().doc("Token superposition phase."));
    v("workers", workers, Rule().doc("Data-parallel workers."));
    v("checkpoint", checkpoint, Rule().doc("Checkpoints."));
    v("metrics", metrics, Rule().doc("Prometheus endpoint of the job's processes."));
    v("suspend", suspend, Rule().doc("true deletes the pods and keeps the job; false resumes."));
    v("backoffLimit", backoff_limit,
      Rule().ge(0).le(1000).doc("Pod failures tolerated before the job is Failed."));
    v("ttlSecondsAfterFinished", ttl_seconds_after_finished,
      Rule().ge(0).doc("Delete the finished job after this many seconds; unset keeps it."));
  }
  void check(const std::string& path, FieldErrors* errors) const;
};

struct TSTPretrainJobStatus {
  std::string phase;
  int64_t observed_generation = 0;
  int32_t step = 0;
  std::string superposition_phase;  // superposition | recovery | baseline
  double loss = 0.0;
  double eval_loss = 0.0;
  int64_t tokens_seen = 0;
  std::vector<Condition> conditions;
  RoleStatus workers;
  int32_t restarts = 0;
  std::string start_time, completion_time;

  template <class V>
  void fields(V& v) {
    v("phase", phase,
      Rule().doc("Pending, Running, Blocked, Suspended, Queued (waiting for Kueue to admit the "
                 "job's Workload: no pods until then; docs/kueue.md), Succeeded or Failed."));
    v("observedGeneration", observed_generation, Rule().doc("Spec generation reconciled."));
    v("step", step, Rule().doc("Last completed step."));
    v("trainingPhase", superposition_phase, Rule().doc("superposition, recovery or baseline."));
    v("loss", loss, Rule().doc("Training loss of the last step."));
    v("evalLoss", eval_loss, Rule().doc("Last held-out next-token loss."));
    v("tokensSeen", tokens_seen, Rule().doc("Corpus tokens read so far."));
    v("conditions", conditions, Rule().doc("Conditions."));
    v("workers", workers, Rule().doc("Worker pods."));
    v("restarts", restarts, Rule().doc("Pod restarts counted against backoffLimit."));
    v("startTime", start_time, Rule().doc("When the job started running."));
    v("completionTime", completion_time, Rule().doc("When the job finished."));
  }
};

// ---------------------------------------------------------------------------------------------
// Whole objects.

template <class Spec, class StatusT>
struct Object {
  std::string api_version = kApiVersion;
  std::string kind;
  ObjectMeta metadata;
  Spec spec;
  StatusT status;

  template <class V>
  void fields(V& v) {
    v("apiVersion", api_version, Rule().values({kApiVersion}).doc("tlt.dev/v1alpha1"));
    v("kind", kind, Rule().values({kRLJobKind, kTSTPretrainJobKind}).doc("Kind of job."));
    v("metadata", metadata, Rule().doc("Object metadata."));
    v("spec", spec, Rule().doc("What to run."));
    v("status", status, Rule().doc("What happened (set by the operator)."));
  }
};

struct RLJob : Object<RLJobSpec, RLJobStatus> {
  RLJob() { kind = kRLJobKind; }
};
struct TSTPretrainJob : Object<TSTPretrainJobSpec, TSTPretrainJobStatus> {
  TSTPretrainJob() { kind = kTSTPretrainJobKind; }
};

}  // namespace tlt::api
