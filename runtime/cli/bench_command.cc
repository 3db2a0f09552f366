// `tlt bench rollout`: bench/rollout for people to try, from the binaries beside `tlt`.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "runtime/cli/commands.h"
#include "runtime/device/device.h"
#include "runtime/tst/job_corpus.h"

namespace tlt::cli {
namespace fs = std::filesystem;

namespace {

// Runs `argv` (argv[0] a path) to completion, with the given extra environment; its exit code,
// or -1 when it could not start.
int run_program(const std::vector<std::string>& argv,
                const std::vector<std::pair<std::string, std::string>>& env) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The value of `--device V` or `--device=V` in args; "" when absent.
std::string device_flag(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--device" && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--device=", 0) == 0) return args[i].substr(9);
  }
  return "";
}

}  // namespace

int bench_rollout_command(const std::vector<std::string>& args, std::ostream& out,
                          std::ostream& err) {
  std::error_code ec;
  fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  fs::path bench = dir / "bench_rollout", data_tool = dir / "tlt-data";
  for (const fs::path& p : {bench, data_tool}) {
    if (!fs::exists(p, ec)) {
      err << "tlt bench rollout: " << p.string()
          << " not found; build it beside tlt (cmake --build build --target "
          << p.filename().string() << ")\n";
      return kExitUnavailable;
    }
  }
  // A device this build or machine does not have fails before the corpus, the warm starts or
  // any training (bench_rollout refuses it too; this says so before any work).
  if (std::string d = device_flag(args); !d.empty()) {
    StatusOr<device::Placement> p =
        device::resolve_device(d, device::probe_inventory(), "--device");
    if (!p.ok()) {
      err << "tlt bench rollout: " << p.status().message() << "\n";
      return kExitInvalid;
    }
  }
  auto has = [&](const char* flag) {
    return std::any_of(args.begin(), args.end(),
                       [&](const std::string& a) { return a.rfind(flag, 0) == 0; });
  };
  // --model PATH: a pretrained model needs no corpus. Its drafter warm start trains and caches on
  // every core first (as a preset's target and drafter do, below), unless only the ceilings or
  // the greedy check run (no warm start).
  if (has("--model")) {
    std::vector<std::string> cmd{bench.string()};
    cmd.insert(cmd.end(), args.begin(), args.end());
    int rc = 0;
    if (!has("--ceiling-only") && !has("--greedy-check") && !has("-h") && !has("--help")) {
      std::vector<std::string> prepare = cmd;
      prepare.push_back("--prepare-only");
      out << std::flush;
      rc = run_program(prepare, {});
    }
    if (rc == 0) rc = run_program(cmd, {{"BLIS_NUM_THREADS", "1"}, {"OMP_NUM_THREADS", "1"}});
    if (rc != 0) err << "tlt bench rollout: bench_rollout exited " << rc << "\n";
    return rc == 0 ? kExitOk : kExitInvalid;
  }
  // The target trains on the State of the Union corpus with a 4096-token BPE tokenizer and a 5%
  // held-out split: a TSTPretrainJob's default data, tokenized and cached the same way.
  StatusOr<std::string> tokens = tst::tokenized_corpus_file(api::TSTPretrainJobSpec(), out);
  if (!tokens.ok()) {
    err << "tlt bench rollout: " << tokens.status().message() << "\n";
    return kExitInvalid;
  }
  std::vector<std::string> cmd{bench.string(), "--tokens", *tokens};
  cmd.insert(cmd.end(), args.begin(), args.end());
  for (const std::string& a : args) {
    if (a == "-h" || a == "--help") return run_program(cmd, {}) == 0 ? kExitOk : kExitInvalid;
  }
  // Train and cache on every core, then measure in a fresh single-threaded process: a rollout
  // worker owns one core, and BLIS fixes its thread count when a process starts.
  std::vector<std::string> prepare = cmd;
  prepare.push_back("--prepare-only");
  out << std::flush;
  int rc = run_program(prepare, {});
  if (rc == 0) rc = run_program(cmd, {{"BLIS_NUM_THREADS", "1"}, {"OMP_NUM_THREADS", "1"}});
  if (rc != 0) err << "tlt bench rollout: bench_rollout exited " << rc << "\n";
  return rc == 0 ? kExitOk : kExitInvalid;
}

}  // namespace tlt::cli
