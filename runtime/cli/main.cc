// `tlt`: validate, explain and run job manifests on one machine.
#include <iostream>

#include <CLI/CLI.hpp>

#include "runtime/cli/commands.h"
#include "runtime/torch_env.h"

int main(int argc, char** argv) {
  CLI::App app{"tlt: RL (TLT) and token-superposition pretraining jobs that waste no GPU time"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "Compute threads (0: one per core)");

  std::vector<std::string> files;
  CLI::App* validate = app.add_subcommand("validate", "Check job manifests; print ok or errors");
  validate->add_option("files", files, "Manifest files")->required()->expected(1, -1);

  std::string kind;
  CLI::App* explain = app.add_subcommand("explain", "Print every spec field with its default");
  explain->add_option("kind", kind, "RLJob or TSTPretrainJob (default: both)");

  std::string job_file;
  bool baseline = false;
  CLI::App* run = app.add_subcommand("run", "Run a job on this machine");
  run->add_option("file", job_file, "Job manifest")->required();
  run->add_flag("--baseline", baseline, "Same job with speculation and drafter training off");

  CLI::App* version = app.add_subcommand("version", "Print versions, devices and threads");

  CLI11_PARSE(app, argc, argv);
  if (*validate) return tlt::cli::validate_command(files, std::cout, std::cerr);
  if (*explain) return tlt::cli::explain_command(kind, std::cout, std::cerr);
  tlt::runtime::configure_threads(threads);
  if (*run) return tlt::cli::run_command(job_file, baseline, std::cout, std::cerr);
  if (*version) return tlt::cli::version_command(std::cout);
  return 1;
}
