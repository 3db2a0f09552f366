// `tlt`: validate, explain and run job manifests on one machine.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/cli/commands.h"
#include "runtime/cli/rl_command.h"
#include "runtime/rollout/generate.h"
#include "runtime/rollout/generate_pretrained.h"
#include "runtime/torch_env.h"

namespace {

// Whether the subcommand computes with LibTorch (validate, explain, score and samples only read
// files and run reward programs, and are spared the re-exec's second load of LibTorch, about
// half a second).
bool computes(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;
    return a != "validate" && a != "explain" && a != "models" && a != "score" && a != "samples";
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // libgomp's wait policy is read before main(): set it and re-execute, once (torch_env.h).
  if (computes(argc, argv)) {
    tlt::runtime::limit_openmp_spinning(argv);
    tlt::runtime::keep_freed_memory();  // freed activations stay for the next update (torch_env.h)
  }
  CLI::App app{"tlt: RL (TLT) and token-superposition pretraining jobs that waste no GPU time"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "Compute threads (0: one per core)");

  std::vector<std::string> files;
  CLI::App* validate = app.add_subcommand(
      "validate",
      "Check job manifests and what they name on this machine (the dataset's first rows, the "
      "model's context, a command reward tried once); print ok or errors");
  validate->add_option("files", files, "Manifest files")->required()->expected(1, -1);
  bool spec_only = false;
  validate->add_flag("--spec-only", spec_only,
                     "Check the manifests alone, as the operator does: no file read, no program "
                     "started (for manifests written for another machine or an image)");

  std::string score_job, score_rows;
  bool score_json = false;
  CLI::App* score = app.add_subcommand(
      "score",
      "Score rows of {prompt, response, answer} with a job's reward (built-in, command or http), "
      "to try a reward before a job runs on it");
  score->add_option("job", score_job, "Job manifest (an RLJob)")->required();
  score
      ->add_option("rows", score_rows,
                   "JSON Lines (or Parquet): each row's response, with its prompt and answer "
                   "(or the job's promptField and answerField) and any spec.reward.fields")
      ->required();
  score->add_flag("--json", score_json, "One {\"row\", \"reward\"} object per row");

  tlt::cli::SamplesFlags samples_flags;
  CLI::App* samples = app.add_subcommand(
      "samples", "Print the scored responses an RL run recorded (its report's samples.jsonl)");
  samples
      ->add_option("dir", samples_flags.dir,
                   "The job's report directory (<checkpoint.path or .tlt/NAME>/report), or a "
                   "samples file in it")
      ->required();
  samples->add_option("--step", samples_flags.step,
                      "Only this step's rows (held-out: 0, the last)");
  samples->add_option("--phase", samples_flags.phase, "Only train or heldout rows")
      ->check(CLI::IsMember({"train", "heldout"}));
  samples->add_option("--worst", samples_flags.worst, "The K lowest-reward rows")
      ->check(CLI::PositiveNumber);

  std::string kind;
  CLI::App* explain = app.add_subcommand("explain", "Print every spec field with its default");
  explain->add_option("kind", kind, "RLJob or TSTPretrainJob (default: both)");

  std::string job_file;
  tlt::cli::RunFlags run_flags;
  CLI::App* run = app.add_subcommand("run", "Run a job on this machine");
  run->add_option("file", job_file, "Job manifest")->required();
  run->add_flag("--baseline", run_flags.baseline,
                "The same job without TLT (RLJob) or without superposition (TSTPretrainJob)");
  run->add_flag("--compare", run_flags.compare,
                "Also run the baseline (no TLT / no superposition) after the job and report both "
                "(on a shared machine the first of two runs is often the slower: before trusting "
                "a small difference, also time --baseline first, then the job)");
  run->add_flag("--resume", run_flags.resume, "Continue from the job's last checkpoint");
  run->add_option("--attach", run_flags.attach_namespace,
                  "RLJob: stand in for the job's pods in this namespace of a cluster: take the "
                  "rebalancer's drafter assignments at each step boundary and report progress "
                  "to the job's status (through the pods' annotations)");
  run->add_option("--kubeconfig", run_flags.kubeconfig,
                  "With --attach: the cluster's kubeconfig (default $KUBECONFIG, else the pod's "
                  "service account)");

  CLI::App* version = app.add_subcommand("version", "Print versions, devices and threads");

  tlt::rollout::GenerateOptions gen;
  CLI::App* generate = app.add_subcommand(
      "generate",
      "Generate from a real model (--model: GGUF file or Hugging Face directory, with its own "
      "tokenizer) or from a preset or checkpoint (byte-level text)");
  generate->add_option("--model", gen.model,
                       "A llama/qwen2 model: a .gguf file or a Hugging Face directory "
                       "(`tlt models` lists ~/.cache/tlt/models)");
  generate->add_option("--chat", gen.chat,
                       "With --model: one user turn in the model's chat layout");
  generate->add_flag("--verbose", gen.verbose, "With --model: load time, peak RSS, prompt tokens");
  generate->add_option("--preset", gen.preset, "tiny or small")->capture_default_str();
  generate->add_option("--device", gen.device, "auto, cpu, cuda or cuda:N (cuda never falls back)")
      ->capture_default_str();
  generate->add_option("--checkpoint", gen.checkpoint, "Model weights (tlt checkpoint)");
  generate->add_option("--drafter", gen.drafter_checkpoint, "Drafter weights (tlt checkpoint)");
  generate->add_option("--prompt", gen.prompt, "Prompt text")->capture_default_str();
  generate->add_option("--max-tokens", gen.max_tokens, "Tokens to generate")->capture_default_str();
  generate->add_option("--temperature", gen.temperature, "0 = greedy")->capture_default_str();
  generate->add_option("--top-p", gen.top_p, "Nucleus mass")->capture_default_str();
  generate->add_option("--seed", gen.seed, "Sampling seed")->capture_default_str();
  generate->add_option("--copies", gen.copies, "Batch of this many copies of the prompt");
  generate->add_flag("--speculative", gen.speculative, "Speculative decoding (lossless)");
  generate->add_option("--arms", gen.arms, "Drafting arms, e.g. 4_1_5 3_3_8 ngram");

  CLI::App* models = app.add_subcommand(
      "models",
      "List the models in ~/.cache/tlt/models ($TLT_MODELS_DIR); scripts/setup.sh fetches "
      "SmolLM2-135M-Instruct there");

  std::string export_model, export_dir, export_format = "auto";
  CLI::App* export_cmd = app.add_subcommand(
      "export",
      "Write a model as a Hugging Face directory (config.json, model.safetensors, tokenizer.json "
      "when known) that transformers loads: a checkpoint RL or TST wrote (file, or its "
      "checkpoint.path), or a GGUF / HF model");
  export_cmd->add_option("model", export_model, "Checkpoint or model path")->required();
  export_cmd->add_option("--hf", export_dir, "Directory to write")->required();
  export_cmd->add_option("--format", export_format, "auto, tlt, gguf or hf")->capture_default_str();

  CLI::App* run_role = app.add_subcommand(
      "run-role", "Run this pod's part of a cluster job (the operator's pods; env TLT_*)");
  CLI::App* worker = app.add_subcommand("rl-worker", "");  // internal: spawned by `tlt run`
  worker->group("");

  CLI::App* bench = app.add_subcommand("bench", "Benchmarks to try (bench/ has the others)");
  CLI::App* bench_rollout = bench->add_subcommand(
      "rollout", "Plain vs adaptive speculative decoding, side by side (flags: see --help)");
  bench_rollout->prefix_command();  // every later argument goes to bench_rollout
  bench->require_subcommand(1);

  CLI11_PARSE(app, argc, argv);
  if (*bench_rollout)
    return tlt::cli::bench_rollout_command(bench_rollout->remaining(), std::cout, std::cerr);
  if (*worker) return tlt::cli::rl_worker_command();
  if (*run_role) return tlt::cli::run_role_command(std::cout, std::cerr);
  if (*validate) return tlt::cli::validate_command(files, spec_only, std::cout, std::cerr);
  if (*explain) return tlt::cli::explain_command(kind, std::cout, std::cerr);
  if (*score)
    return tlt::cli::score_command(score_job, score_rows, score_json, std::cout, std::cerr);
  if (*models) return tlt::cli::models_command(std::cout, std::cerr);
  if (*samples) return tlt::cli::samples_command(samples_flags, std::cout, std::cerr);
  tlt::runtime::configure_threads(threads);
  if (*run) return tlt::cli::run_command(job_file, run_flags, std::cout, std::cerr);
  if (*version) return tlt::cli::version_command(std::cout);
  if (*export_cmd)
    return tlt::cli::export_command(export_model, export_format, export_dir, std::cout, std::cerr);
  if (*generate) {
    tlt::Status st = gen.model.empty()
                         ? tlt::rollout::run_generate(gen, std::cout)
                         : tlt::rollout::run_generate_pretrained(gen, std::cout, std::cerr);
    if (!st.ok()) std::cerr << "tlt generate: " << st.message() << "\n";
    return st.ok() ? 0 : 1;
  }
  return 1;
}
