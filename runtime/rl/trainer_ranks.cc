#include "runtime/rl/trainer_ranks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <random>

#include "api/decode.h"
#include "api/encode.h"
#include "runtime/cluster/job_secret.h"
#include "runtime/device/device.h"
#include "runtime/model/model_source.h"
#include "runtime/torch_env.h"

namespace tlt::rl {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSetupKey = "trainer/setup";

// A fresh file for the local group's store in <dir>/rendezvous, a directory only this user may
// enter (made 0700, refused when it is another user's or looser).
StatusOr<std::string> local_store_file(const std::string& dir) {
  fs::path d = fs::path(dir) / "rendezvous";
  std::error_code ec;
  fs::create_directories(d, ec);
  struct stat st {};
  if (ec || ::chmod(d.c_str(), 0700) != 0 || ::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    return Status::FailedPrecondition("the trainer group's rendezvous directory " + d.string() +
                                      " cannot be made private to this user (0700); check "
                                      "spec.checkpoint.path's permissions");
  }
  std::random_device rd;
  char name[40];
  std::snprintf(name, sizeof name, "group-%08x%08x", unsigned(rd()), unsigned(rd()));
  return (d / name).string();
}

tst::GroupOptions group_options(const TrainerGroupOptions& o) {
  tst::GroupOptions g;
  g.rank = o.rank, g.world = o.world, g.host = o.host, g.port = o.port;
  g.loopback = !o.store_file.empty() || o.host == "127.0.0.1" || o.host == "localhost";
  g.store_file = o.store_file, g.store_prefix = o.store_prefix;
  g.rendezvous_timeout_s = o.rendezvous_timeout_s, g.timeout_s = o.timeout_s, g.cuda = o.cuda;
  return g;
}

// The update's options from the setup message: spec.algorithm as api/encode.h wrote it, and
// rank 0's precision.
StatusOr<GrpoOptions> setup_grpo(const json& s) {
  api::AlgorithmSpec algorithm;
  api::FieldErrors errors;
  api::decode(s.at("algorithm"), "spec.algorithm", &algorithm, &errors);
  if (!errors.empty())
    return Status::InvalidArgument("the setup message's " + errors.front().path + ": " +
                                   errors.front().message);
  return grpo_options(algorithm, s.at("bfloat16").get<bool>());
}

// The policy's architecture from the setup message.
StatusOr<model::ModelConfig> setup_config(const json& s) {
  const std::string card = s.at("model_card");
  if (card.empty()) return model::preset_config(s.at("preset"), s.at("vocab").get<int64_t>());
  StatusOr<model::ModelCard> c = model::model_card_from_json(card, "the trainer setup's model");
  if (!c.ok()) return c.status();
  return c->config.config;
}

}  // namespace

std::string trainer_store_prefix(const std::string& secret) {
  return "tlt-trainers/" + cluster::hmac_hex(secret, "trainer group store");
}

json trainer_setup(const RLRunPlan& plan, const PolicySetup& models) {
  return {{"preset", plan.preset()},
          {"vocab", models.cfg.vocab},
          {"model_card", plan.pretrained() ? model::model_card_json(models.card) : ""},
          {"device", plan.model.device},
          {"algorithm", api::to_json(plan.algorithm)},
          {"bfloat16", models.bfloat16}};
}

StatusOr<std::unique_ptr<TrainerRanks>> TrainerRanks::start(const TrainerGroupOptions& options,
                                                            const std::string& job_file,
                                                            const std::string& dir,
                                                            const json& setup) {
  std::unique_ptr<TrainerRanks> t(new TrainerRanks());
  TrainerGroupOptions o = options;
  const bool local = o.store_file.empty() && o.port == 0;
  if (local) {
    StatusOr<std::string> file = local_store_file(dir);
    if (!file.ok()) return file.status();
    o.store_file = *file;
  }
  StatusOr<std::unique_ptr<tst::DataParallelGroup>> group =
      tst::DataParallelGroup::open(group_options(o));
  if (!group.ok()) return group.status().with_context("trainer group");
  t->group_ = std::move(*group);
  TLT_RETURN_IF_ERROR(t->group_->set(kSetupKey, setup.dump()));
  if (local) {
    runtime::ComputeInfo info = runtime::compute_info();
    tst::LocalWorkerEnv env;
    env.role = "trainer";
    env.threads = std::max(1, std::min(info.intra_op_threads, info.cores / o.world));
    TLT_RETURN_IF_ERROR(t->ranks_.start(job_file, dir, o.world, o.store_file, env));
  }
  Status joined = t->group_->join();
  if (!joined.ok()) {
    std::string failed = t->ranks_.wait(5);
    return Status(joined.code(), "trainer group: rank 0 of " + std::to_string(o.world) + ": " +
                                     joined.message() + (failed.empty() ? "" : "\n" + failed));
  }
  return t;
}

TrainerRanks::~TrainerRanks() = default;

std::string TrainerRanks::exited() {
  return ranks_.exited();
}

std::string TrainerRanks::finish(int timeout_s) {
  group_.reset();
  return ranks_.wait(timeout_s);
}

Status serve_trainer_rank(const TrainerGroupOptions& options, std::ostream& log) {
  const std::string who =
      "trainer rank " + std::to_string(options.rank) + " of " + std::to_string(options.world);
  StatusOr<std::unique_ptr<tst::DataParallelGroup>> group =
      tst::DataParallelGroup::open(group_options(options));
  if (!group.ok()) return group.status().with_context(who);
  StatusOr<std::string> text = Status::DeadlineExceeded("");
  do {  // rank 0 writes it once its models are set up (a warm start can take long)
    text = (*group)->get(kSetupKey, 60);
  } while (text.status().code() == StatusCode::kDeadlineExceeded);
  if (!text.ok()) return text.status().with_context(who);
  json setup;
  try {
    setup = json::parse(*text);
    StatusOr<model::ModelConfig> cfg = setup_config(setup);
    if (!cfg.ok()) return cfg.status().with_context(who);
    StatusOr<device::Placement> placement =
        device::resolve_device(setup.at("device"), device::probe_inventory());
    if (!placement.ok()) return placement.status().with_context(who);
    // A local run's ranks take their round-robin share of this machine's devices; a pod its own.
    const std::string dev = options.store_file.empty() ? placement->main_device()
                                                       : placement->process_device(options.rank);
    TLT_RETURN_IF_ERROR(device::make_current(dev));
    model::Transformer policy(*cfg), reference(*cfg);
    policy->to(torch::Device(dev)), reference->to(torch::Device(dev));
    for (auto& p : reference->parameters()) p.set_requires_grad(false);
    reference->eval(), policy->eval();
    TLT_RETURN_IF_ERROR((*group)->join().with_context(who));
    StatusOr<GrpoOptions> grpo = setup_grpo(setup);
    if (!grpo.ok()) return grpo.status().with_context(who);
    PolicyTrainer trainer(policy, reference, *grpo, group->get());
    log << "tlt run-role: " << who << " joined on " << dev << "\n" << std::flush;
    TLT_RETURN_IF_ERROR(trainer.serve(0).with_context(who));
    log << "tlt run-role: " << who << " done (optimizer shard " << trainer.optimizer_bytes()
        << " bytes)\n";
  } catch (const json::exception& e) {
    return Status::InvalidArgument(who +
                                   ": the setup message from rank 0 is not valid: " + e.what());
  }
  return Status::Ok();
}

}  // namespace tlt::rl
