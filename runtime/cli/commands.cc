#include "runtime/cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <ostream>

#include "api/encode.h"
#include "api/labels.h"
#include "api/manifest.h"
#include "api/trainer_group.h"
#include "runtime/cli/local_checks.h"
#include "runtime/cli/rl_command.h"
#include "runtime/cli/tst_command.h"
#include "runtime/cluster/job_secret.h"
#include "runtime/cpu_info.h"
#include "runtime/device/device.h"
#include "runtime/model/hf_export.h"
#include "runtime/rl/checkpoint.h"
#include "runtime/rl/trainer_ranks.h"
#include "runtime/torch_env.h"

namespace tlt::cli {
namespace {

std::string document_label(const std::string& file, const api::Document& doc, size_t n_docs) {
  return n_docs > 1 ? file + "[" + std::to_string(doc.index) + "]" : file;
}

// "LABEL: 2 errors" and each error, one a line.
void print_errors(const std::string& label, const api::FieldErrors& errors, std::ostream& err) {
  err << label << ": " << errors.size() << (errors.size() == 1 ? " error" : " errors") << "\n";
  for (const api::FieldError& e : errors) err << "  " << e.to_string() << "\n";
}

void print_findings(const std::string& kind, const api::FieldErrors& found, std::ostream& os) {
  for (const api::FieldError& e : found) os << "  " << kind << ": " << e.to_string() << "\n";
}

}  // namespace

int validate_command(const std::vector<std::string>& files, bool spec_only, std::ostream& out,
                     std::ostream& err) {
  int code = kExitOk;
  for (const std::string& file : files) {
    StatusOr<std::vector<api::Document>> docs = api::parse_manifest_file(file);
    if (!docs.ok()) {
      err << docs.status().message() << "\n";
      code = kExitInvalid;
      continue;
    }
    for (const api::Document& doc : *docs) {
      std::string label = document_label(file, doc, docs->size());
      if (!doc.ok()) {
        code = kExitInvalid;
        print_errors(label, doc.errors, err);
        continue;
      }
      LocalCheckOptions o;
      o.manifest = file;
      Findings f = spec_only ? Findings() : check_local(*doc.job, o);
      std::ostream& os = f.errors.empty() ? out : err;
      if (f.errors.empty()) {
        out << label << ": ok (" << api::job_kind(*doc.job) << " " << api::job_name(*doc.job)
            << ")\n";
      } else {
        code = kExitInvalid;
        print_errors(label, f.errors, err);
      }
      print_findings("warning", f.warnings, os);
      print_findings("note", f.notes, os);
    }
  }
  return code;
}

StatusOr<api::Job> read_job(const std::string& file, const std::string& command,
                            std::ostream& err) {
  StatusOr<std::vector<api::Document>> docs = api::parse_manifest_file(file);
  if (!docs.ok()) {
    err << command << ": " << docs.status().message() << "\n";
    return docs.status();
  }
  if (docs->size() != 1) {
    err << command << ": " << file << " holds " << docs->size()
        << " documents; give a file with one job\n";
    return Status::InvalidArgument(file + ": not one job");
  }
  const api::Document& doc = (*docs)[0];
  if (!doc.ok()) {
    print_errors(command + ": " + file, doc.errors, err);
    return Status::InvalidArgument(file + ": not a valid job");
  }
  return *doc.job;
}

int explain_command(const std::string& kind, std::ostream& out, std::ostream& err) {
  std::vector<std::string> kinds;
  if (kind.empty()) {
    kinds = {api::kRLJobKind, api::kTSTPretrainJobKind};
  } else {
    kinds = {kind};
  }
  for (const std::string& k : kinds) {
    std::string table = api::reference_markdown(k);
    if (table.empty()) {
      err << "tlt explain: unknown kind \"" << k << "\"; use RLJob or TSTPretrainJob\n";
      return kExitInvalid;
    }
    out << "### " << k << "\n\n" << table << "\n";
  }
  return kExitOk;
}

int run_command(const std::string& file, const RunFlags& flags, std::ostream& out,
                std::ostream& err) {
  StatusOr<api::Job> read = read_job(file, "tlt run", err);
  if (!read.ok()) return kExitInvalid;
  LocalCheckOptions o;
  o.manifest = file, o.probe_reward = false;  // the run starts the program itself
  Findings f = check_local(*read, o);
  print_findings("warning", f.warnings, err);
  if (!f.errors.empty()) {
    print_errors("tlt run: " + file, f.errors, err);
    return kExitInvalid;
  }
  const api::Job& job = *read;
  if (const auto* tst = std::get_if<api::TSTPretrainJob>(&job)) {
    TSTRunFlags tf;
    tf.baseline = flags.baseline, tf.compare = flags.compare, tf.resume = flags.resume;
    return run_tst_job(*tst, tf, out, err);
  }
  const auto& rl_job = std::get<api::RLJob>(job);
  RLRunFlags rf;
  rf.baseline = flags.baseline, rf.compare = flags.compare, rf.resume = flags.resume;
  rf.attach_namespace = flags.attach_namespace, rf.kubeconfig = flags.kubeconfig;
  return run_rl_job(rl_job, rf, out, err);
}

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// The trainer group's world, rank 0's host and port (api/trainer_group.h): TLT_TRAINER_WORLD
// (else spec.roles.trainer.replicas), TLT_TRAINER_GROUP_ADDRESS (host:port or a host; else
// <job>-trainer-0.<TLT_SERVICE>) and TLT_TRAINER_GROUP_PORT. InvalidArgument naming the variable.
struct TrainerGroupEnv {
  int world = 1, port = api::kDefaultTrainerGroupPort;
  std::string host;
};
StatusOr<TrainerGroupEnv> trainer_group_env(const api::RLJob& job) {
  TrainerGroupEnv g;
  g.world = std::max(1, job.spec.roles.trainer.replicas);
  std::string world = env_or(api::kTrainerWorldEnv, ""),
              port = env_or(api::kTrainerGroupPortEnv, "");
  g.host = env_or(api::kTrainerGroupAddressEnv, "");
  char* end = nullptr;
  if (!world.empty()) {
    long w = std::strtol(world.c_str(), &end, 10);
    if (*end != '\0' || w < 1 || w > 4096)
      return Status::InvalidArgument(std::string(api::kTrainerWorldEnv) + " (" + world +
                                     ") is not a number of trainer ranks in [1, 4096]");
    g.world = int(w);
  }
  const size_t colon = g.host.rfind(':');
  if (colon != std::string::npos) port = g.host.substr(colon + 1), g.host.resize(colon);
  if (!port.empty()) {
    long p = std::strtol(port.c_str(), &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535)
      return Status::InvalidArgument(std::string(colon != std::string::npos
                                                     ? api::kTrainerGroupAddressEnv
                                                     : api::kTrainerGroupPortEnv) +
                                     ": " + port + " is not a port");
    g.port = int(p);
  }
  if (g.host.empty())
    g.host = api::pod_name(job.metadata.name, "trainer", 0) + "." +
             env_or("TLT_SERVICE", job.metadata.name + "-rl");
  return g;
}

// Trainer rank `index` > 0 of an RLJob: a local run's rank process (TLT_RENDEZVOUS_FILE names
// the group's file store) or a trainer pod (rank 0's store at trainer_group_env's address).
int trainer_rank_role(const api::RLJob& job, int index, std::ostream& out, std::ostream& err) {
  StatusOr<TrainerGroupEnv> group = trainer_group_env(job);
  if (!group.ok()) {
    err << "tlt run-role: " << group.status().message() << "\n";
    return kExitInvalid;
  }
  if (index >= group->world) {
    err << "tlt run-role: trainer " << index << " has no rank: " << job.metadata.name << " has "
        << group->world << " trainer ranks (spec.roles.trainer.replicas, " << api::kTrainerWorldEnv
        << ")\n";
    return kExitInvalid;
  }
  rl::TrainerGroupOptions o;
  o.rank = index, o.world = group->world;
  o.store_file = env_or("TLT_RENDEZVOUS_FILE", "");
  const int timeout_s = std::atoi(env_or("TLT_COLLECTIVE_TIMEOUT_S", "300").c_str());
  o.timeout_s = timeout_s > 0 ? timeout_s : 300;
  if (o.store_file.empty()) {  // a pod: rank 0's store, under the job secret's prefix
    o.port = group->port, o.host = group->host;
    StatusOr<std::string> secret = cluster::load_job_secret();
    if (!secret.ok()) {
      err << "tlt run-role: trainer " << index << ": " << secret.status().message() << "\n";
      return kExitInvalid;
    }
    o.store_prefix = rl::trainer_store_prefix(*secret);
  }
  int threads = std::atoi(env_or("TLT_THREADS", "0").c_str());
  if (threads > 0) runtime::configure_threads(threads);
  StatusOr<device::Placement> placement =
      device::resolve_device(job.spec.model.device, device::probe_inventory());
  if (!placement.ok()) {
    err << "tlt run-role: " << placement.status().message() << "\n";
    return kExitInvalid;
  }
  o.cuda = placement->main_device() != "cpu";
  out << "tlt run-role: RLJob " << job.metadata.name << " trainer rank " << index << " of "
      << o.world << (o.store_file.empty() ? " at " + o.host + ":" + std::to_string(o.port) : "")
      << "\n"
      << std::flush;
  Status served = rl::serve_trainer_rank(o, out);
  if (!served.ok()) {
    err << "tlt run-role: " << served.message() << "\n";
    return 1;
  }
  return kExitOk;
}

}  // namespace

int run_role_command(std::ostream& out, std::ostream& err) {
  std::string file = env_or("TLT_JOB_FILE", ""), role = env_or("TLT_ROLE", "");
  std::string index_s = env_or("TLT_INDEX", "0"), ns = env_or("TLT_NAMESPACE", "");
  if (file.empty() || role.empty()) {
    err << "tlt run-role: TLT_JOB_FILE and TLT_ROLE must be set (the operator sets them on the "
           "pods it creates; see `tlt run` to run a job on this machine)\n";
    return kExitInvalid;
  }
  char* end = nullptr;
  long index = std::strtol(index_s.c_str(), &end, 10);
  long port = std::strtol(env_or("TLT_RENDEZVOUS_PORT", "29500").c_str(), nullptr, 10);
  if (*end != '\0' || index < 0 || port <= 0 || port > 65535) {
    err << "tlt run-role: TLT_INDEX (" << index_s << ") or TLT_RENDEZVOUS_PORT is not valid\n";
    return kExitInvalid;
  }
  StatusOr<std::vector<api::Document>> docs = api::parse_manifest_file(file);
  if (!docs.ok() || docs->size() != 1 || !(*docs)[0].ok()) {
    err << "tlt run-role: " << file << " is not one valid job"
        << (docs.ok() ? "" : ": " + docs.status().message()) << "\n";
    return kExitInvalid;
  }
  const api::Job& job = *(*docs)[0].job;
  if (const auto* tst = std::get_if<api::TSTPretrainJob>(&job)) {
    return run_tst_role(*tst, int(index), int(port), out, err);  // rank TLT_INDEX of the workers
  }
  const auto& rl = std::get<api::RLJob>(job);
  if (role == "rollout" || role == "drafter") {  // workers: the drafter pods after the rollout
    std::string trainer =
        env_or("TLT_TRAINER_ADDRESS", api::pod_name(rl.metadata.name, "trainer", 0) + "." +
                                          env_or("TLT_SERVICE", rl.metadata.name + "-rl"));
    int worker = int(index) + (role == "drafter" ? std::max(1, rl.spec.roles.rollout.replicas) : 0);
    // A device this pod cannot have ends it before it connects (its setup resolves it again).
    StatusOr<device::Placement> placement =
        device::resolve_device(rl.spec.model.device, device::probe_inventory());
    if (!placement.ok()) {
      err << "tlt run-role: " << placement.status().message() << "\n";
      return kExitInvalid;
    }
    out << placement->line() << "\n";
    return rl_remote_worker(trainer, int(port), worker, env_or("TLT_WORK_DIR", "/tmp/tlt-work"),
                            out, err);
  }
  if (role == "trainer" && index > 0) return trainer_rank_role(rl, int(index), out, err);
  if (role == "trainer" && index == 0) {
    RLRunFlags f;
    f.listen_port = int(port);
    // A pod made again (after a failure, or an eviction by Kueue) goes on from the checkpoint
    // its predecessor left: the cluster's run is "tlt", in <spec.checkpoint.path>/tlt.
    f.resume = !rl.spec.checkpoint.path.empty() &&
               rl::rl_checkpoint_exists(rl.spec.checkpoint.path + "/tlt");
    StatusOr<TrainerGroupEnv> group = trainer_group_env(rl);
    if (!group.ok()) {
      err << "tlt run-role: " << group.status().message() << "\n";
      return kExitInvalid;
    }
    f.trainer_world = group->world, f.trainer_group_port = group->port;
    f.trainer_group_host = group->host;
    long sync_port = std::strtol(env_or("TLT_WEIGHT_SYNC_PORT", "29501").c_str(), nullptr, 10);
    if (sync_port <= 0 || sync_port > 65535) {
      err << "tlt run-role: TLT_WEIGHT_SYNC_PORT is not a port\n";
      return kExitInvalid;
    }
    f.weight_sync_port = int(sync_port);
    // The link to the apiserver needs credentials: $KUBECONFIG, or a mounted service-account
    // token (absent with automountServiceAccountToken: false). Without them the job trains
    // without it (no assignments, no progress in the job's status), saying so.
    bool sa_token = std::getenv("KUBERNETES_SERVICE_HOST") &&
                    ::access("/var/run/secrets/kubernetes.io/serviceaccount/token", R_OK) == 0;
    if (!ns.empty() && (sa_token || std::getenv("KUBECONFIG"))) {
      f.attach_namespace = ns;
    } else {
      err << "tlt run-role: no Kubernetes credentials (no $KUBECONFIG, no service-account token): "
             "running without the rebalancer's assignments and without progress in the job's "
             "status\n";
    }
    return run_rl_job(rl, f, out, err);
  }
  err << "tlt run-role: role " << role << " " << index
      << " has nothing to run: an RLJob runs its trainer ranks (role trainer), its rollout pods "
         "and its drafter pods\n";
  return kExitUnavailable;
}

namespace {

// Bytes under `p`: a file's size, or a directory's files summed.
uint64_t size_of(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_directory(p, ec)) return std::filesystem::file_size(p, ec);
  uint64_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(p, ec)) {
    if (e.is_regular_file(ec)) n += e.file_size(ec);
  }
  return n;
}

}  // namespace

int export_command(const std::string& model, const std::string& format, const std::string& hf_dir,
                   std::ostream& out, std::ostream& err) {
  StatusOr<model::ExportResult> r = model::export_to_hf(model, format, hf_dir);
  if (!r.ok()) {
    err << "tlt export: " << r.status().message() << "\n";
    return kExitInvalid;
  }
  for (const std::string& f : r->files) out << "wrote " << f << "\n";
  if (!r->tokenizer_note.empty()) out << "note: " << r->tokenizer_note << "\n";
  return kExitOk;
}

int models_command(std::ostream& out, std::ostream& err) {
  namespace fs = std::filesystem;
  fs::path dir = env_or("TLT_MODELS_DIR", env_or("HOME", ".") + "/.cache/tlt/models");
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    bool gguf = e.is_regular_file(ec) && e.path().extension() == ".gguf";
    bool hf = e.is_directory(ec) && fs::exists(e.path() / "config.json", ec);
    if (gguf || hf) found.push_back(e.path());
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) {
    err << "tlt models: no models in " << dir.string()
        << "; scripts/setup.sh fetches SmolLM2-135M-Instruct there\n";
    return kExitOk;
  }
  for (const fs::path& p : found) {
    out << p.filename().string() << "  " << (size_of(p) >> 20) << " MiB  " << p.string() << "\n";
  }
  return kExitOk;
}

int version_command(std::ostream& out) {
  runtime::ComputeInfo info = runtime::compute_info();
  out << "tlt " << TLT_VERSION << "\n"
      << "libtorch " << info.torch_version << "\n"
      << "cuda " << (info.cuda_available ? "yes" : "no") << " devices=" << info.cuda_devices << "\n"
      << "threads " << info.intra_op_threads << " cores=" << info.cores << "\n"
      << "openmp wait " << info.openmp_wait << "\n"
      << "cpu " << runtime::describe(runtime::cpu_info()) << "\n";
  return kExitOk;
}

}  // namespace tlt::cli
