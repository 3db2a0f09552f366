// The `tlt` command line: each subcommand is a function returning the process exit code.
// Output goes to the given streams so tests can capture it. No function here calls exit().
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "api/manifest.h"
#include "api/status.h"

namespace tlt::cli {

// Exit codes shared by the subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;       // a manifest (or flag) is wrong
inline constexpr int kExitUnavailable = 69;  // the feature is not built yet (EX_UNAVAILABLE)

// `tlt validate [--spec-only] FILE...`: prints "FILE: ok (KIND NAME)" per valid document, or the
// file and every error, one per line as "  path: message". Unless spec_only, a valid document's
// files and reward program are then checked on this machine (local_checks.h): their errors fail
// it too, and its warnings ("  warning: path: message") and notes ("  note: ...") follow its
// line. Returns kExitInvalid if any document fails.
int validate_command(const std::vector<std::string>& files, bool spec_only, std::ostream& out,
                     std::ostream& err);

// The one valid job of manifest `file`, or an error after the problems were printed on `err`
// (each line prefixed with `command`, e.g. "tlt run", once): the file's, or every field's.
StatusOr<api::Job> read_job(const std::string& file, const std::string& command, std::ostream& err);

// `tlt score JOB ROWS [--json]`: the job's reward (spec.reward: built-in, command or http, or a
// generated task's own) of each row of ROWS (JSON Lines or Parquet, as a dataset): a row holds
// "response" and, as a run's requests, "prompt" and "answer" (else the job's promptField and
// answerField) and any spec.reward.fields. Prints "ROWS:LINE  REWARD  RESPONSE..." per row and a
// summary line, or with --json one {"row", "reward"} object per row (the summary on `err`).
// kExitInvalid for a bad job or row; 1 when the reward fails (its error, as a run's step would
// fail).
int score_command(const std::string& job_file, const std::string& rows_file, bool as_json,
                  std::ostream& out, std::ostream& err);

// `tlt samples DIR [--step N] [--phase train|heldout] [--worst K]`: the scored responses an RL
// run recorded (DIR/samples.jsonl, or DIR naming the file; runtime/rl/samples.h), each as a
// header line (step, phase, request id, dataset row, reward, tokens, finish reason) and its
// prompt, answer, fields and response wrapped to 100 columns; then a summary line. --step and
// --phase filter; --worst K shows the K lowest rewards (ties in file order). kExitInvalid when
// the file is missing (naming another run's samples file in DIR, if any) or a line is not a row.
struct SamplesFlags {
  std::string dir;
  int64_t step = -1;  // -1: every step
  std::string phase;  // "": both
  int64_t worst = 0;  // 0: every row, in file order
};
int samples_command(const SamplesFlags& flags, std::ostream& out, std::ostream& err);

// `tlt bench rollout [FLAGS]`: bench/rollout (plain vs adaptive speculative decoding of a small
// target trained on the State of the Union corpus) from the bench_rollout and tlt-data binaries
// beside this one; FLAGS go to bench_rollout (--help lists them). kExitUnavailable when those
// binaries are missing, kExitInvalid when the benchmark fails or (before any work) --device
// names a device this build or machine does not have.
int bench_rollout_command(const std::vector<std::string>& args, std::ostream& out,
                          std::ostream& err);

// `tlt export MODEL --hf DIR [--format F]`: MODEL (a tlt checkpoint that RL or TST wrote, or any
// model spec.model.path accepts) as a Hugging Face directory (runtime/model/hf_export.h). Prints
// the files written and, when no tokenizer.json could be written, why. kExitInvalid on error.
int export_command(const std::string& model, const std::string& format, const std::string& hf_dir,
                   std::ostream& out, std::ostream& err);

// `tlt explain [KIND]`: the configuration reference of one kind (or both) as Markdown.
int explain_command(const std::string& kind, std::ostream& out, std::ostream& err);

// `tlt run FILE`: validates the manifest (read_job) and checks its files on this machine
// (local_checks.h, without starting the reward program), printing every problem, then runs the
// job. Returns kExitInvalid for a bad manifest or a file that fails its check.
struct RunFlags {
  bool baseline = false;  // the same job without TLT (RL) or without superposition (TST)
  bool compare = false;   // TST: also run the baseline and report both
  bool resume = false;    // continue from the job's checkpoints
  // RLJob: attach the run to the job's pods in this namespace of a cluster (see RLRunFlags).
  std::string attach_namespace;
  std::string kubeconfig;  // "" with attach_namespace: $KUBECONFIG, else in-cluster
};
int run_command(const std::string& file, const RunFlags& flags, std::ostream& out,
                std::ostream& err);

// `tlt run-role`: what a pod of a cluster job runs (the operator sets its command and env):
//   TLT_JOB_FILE (the job, from the spec ConfigMap), TLT_ROLE, TLT_INDEX, TLT_NAMESPACE; and
//   optionally TLT_RENDEZVOUS_PORT (29500, the headless Service's port), TLT_TRAINER_ADDRESS
//   (default <job>-trainer-0.<TLT_SERVICE>, the trainer pod's DNS name), TLT_WORK_DIR
//   (/tmp/tlt-work: where a rollout pod keeps the files it is sent), TLT_WEIGHT_SYNC_PORT
//   (29501: where the trainer hosts the weight-sync group's store) and TLT_WEIGHT_SYNC_ADDRESS
//   (host:port the rollout pods reach it at; default the trainer's address and the port the
//   trainer names).
// RLJob: the trainer pod (index 0) runs the driver, whose rollout workers are the rollout pods
// (they connect to it; control messages, drafter parts and hidden states travel over the
// connection; policy and drafter weights over the weight-sync group, runtime/rl/weight_sync.h,
// unless TLT_WEIGHT_SYNC=file sends them over the connection too); with
// Kubernetes credentials (in-cluster or $KUBECONFIG) it also takes the rebalancer's assignments
// and writes progress to its pod (as `tlt run --attach`). A rollout pod is one worker; a drafter
// pod (spec.roles.drafter) is a worker that never generates and trains the drafter through
// every rollout phase (numbered after the rollout pods). With spec.roles.trainer.replicas N > 1
// the trainer pods are the trainer ranks (runtime/rl/trainer_ranks.h, api/trainer_group.h):
// index 0 also hosts their group's store on TLT_TRAINER_GROUP_PORT; index r > 0 (or a local
// run's rank process, TLT_RENDEZVOUS_FILE set) joins as rank r and takes its share of each
// policy update until rank 0 finishes (kExitInvalid for an index >= TLT_TRAINER_WORLD).
// TSTPretrainJob: the worker pod TLT_INDEX is that rank of the data-parallel group (rank 0 hosts
// the rendezvous on TLT_RENDEZVOUS_PORT; the others reach <job>-worker-0.<TLT_SERVICE>).
// Anything else returns kExitUnavailable saying why.
int run_role_command(std::ostream& out, std::ostream& err);

// `tlt models`: the models in $TLT_MODELS_DIR (default ~/.cache/tlt/models): each .gguf file and
// each directory with a config.json, with its size, one per line as "NAME  SIZE  PATH". An empty
// or missing directory prints how to fetch SmolLM2 (scripts/setup.sh). Always kExitOk.
int models_command(std::ostream& out, std::ostream& err);

// `tlt version`: tlt and LibTorch versions, devices, threads, and the CPU (runtime/cpu_info.h:
// vendor, family and model, and its bfloat16 and AMX flags).
int version_command(std::ostream& out);

}  // namespace tlt::cli
