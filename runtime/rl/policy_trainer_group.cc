// PolicyTrainer's checkpoints and its part in a group of trainer ranks: the commands rank 0 posts
// to the others (runtime/rl/policy_trainer.h), the weights sent at the start and after a load,
// the optimizer shards gathered for a save, the per-rank figures and the parameter checksums.
#include <filesystem>

#include "runtime/io/atomic_file.h"
#include "runtime/model/checkpoint.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/trainer_shards.h"
#include "runtime/tst/group.h"

namespace tlt::rl {
namespace {

// How long serve() waits on the store at a time; a store that is gone answers sooner.
constexpr int kCommandPollS = 60;

std::vector<torch::Tensor> all_parameters(model::Transformer& policy,
                                          model::Transformer& reference) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : policy->parameters()) out.push_back(p);
  for (const torch::Tensor& p : reference->parameters()) out.push_back(p);
  return out;
}

Status write_optimizer(const std::string& path, torch::optim::AdamW& optimizer) {
  return io::atomic_write(path, [&](std::ostream& out) {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to(out);
    return Status::Ok();
  });
}

Status read_optimizer(const std::string& path, const torch::Device& device,
                      torch::optim::AdamW& optimizer) {
  try {
    torch::serialize::InputArchive archive;
    // The optimizer's state on the policy's device, wherever the checkpoint was written.
    archive.load_from(path, device);
    optimizer.load(archive);
  } catch (const c10::Error& e) {
    return Status::Corruption(path + ": cannot be read (" +
                              std::string(e.what_without_backtrace()).substr(0, 200) +
                              "); delete this checkpoint directory to resume from an older one");
  }
  return Status::Ok();
}

}  // namespace

int PolicyTrainer::rank() const {
  return group_ ? group_->rank() : 0;
}

int PolicyTrainer::world() const {
  return group_ ? group_->world() : 1;
}

int64_t PolicyTrainer::optimizer_bytes() const {
  return adam_state_bytes(*optimizer_);
}

Status PolicyTrainer::post(const std::string& op) const {
  return group_->set("trainer/command/" + std::to_string(commands_++), op);
}

UpdateStats PolicyTrainer::gather_stats(UpdateStats st) {
  const int64_t rss = peak_rss_bytes(), opt = optimizer_bytes();
  if (!group_) {
    st.rank_peak_rss_bytes = {rss}, st.rank_optimizer_bytes = {opt};
    return st;
  }
  tst::Collective& c = *group_->collective();
  torch::Tensor sums = torch::tensor(
      {st.loss, st.kl, st.clip_fraction, double(st.microbatches), double(st.positions)},
      torch::kFloat64);                                             // (5,)
  torch::Tensor memory = torch::tensor({rss, opt}, torch::kInt64);  // (2,)
  StatusOr<torch::Tensor> all = gather_rows(c, sums);               // (W, 5)
  if (!all.ok()) return st.status = all.status(), st;
  StatusOr<torch::Tensor> mem = gather_rows(c, memory);  // (W, 2)
  if (!mem.ok()) return st.status = mem.status(), st;
  torch::Tensor total = all->sum(0);  // (5,)
  st.loss = total[0].item<double>(), st.kl = total[1].item<double>();
  st.clip_fraction = total[2].item<double>();
  st.microbatches = int64_t(total[3].item<double>()),
  st.positions = int64_t(total[4].item<double>());
  for (int r = 0; r < world(); ++r) {
    st.rank_peak_rss_bytes.push_back((*mem)[r][0].item<int64_t>());
    st.rank_optimizer_bytes.push_back((*mem)[r][1].item<int64_t>());
  }
  return st;
}

Status PolicyTrainer::check_parameters() {
  torch::Tensor mine = torch::tensor({bit_checksum(params_)}, torch::kInt64);  // (1,)
  StatusOr<torch::Tensor> all = gather_rows(*group_->collective(), mine);      // (W, 1)
  if (!all.ok()) return all.status();
  const int64_t first = (*all)[0][0].item<int64_t>();
  for (int r = 1; r < world(); ++r) {
    const int64_t other = (*all)[r][0].item<int64_t>();
    if (other != first)
      return Status::Internal(
          "trainer ranks 0 and " + std::to_string(r) +
          " hold different policy parameters before update " + std::to_string(updates_ + 1) +
          " (checksums " + std::to_string(first) + " and " + std::to_string(other) +
          "): a rank's weights changed outside the update, or the ranks run different builds");
  }
  return Status::Ok();
}

Status PolicyTrainer::synchronise() {
  if (!group_) return Status::Ok();
  TLT_RETURN_IF_ERROR(post("synchronise"));
  std::vector<torch::Tensor> all = all_parameters(policy_, reference_);
  return broadcast_from_owners(*group_->collective(), all, std::vector<int>(all.size(), 0));
}

Status PolicyTrainer::finish() {
  if (!group_) return Status::Ok();
  return post("finish");
}

Status PolicyTrainer::gather_optimizer(torch::optim::AdamW* full) const {
  return gather_adam_state(*group_->collective(), params_, owner_, *optimizer_, full);
}

Status PolicyTrainer::save(const std::string& dir, const std::string& metadata) const {
  std::unique_ptr<torch::optim::AdamW> full;  // rank 0 of a group: every shard's state
  if (group_) {
    TLT_RETURN_IF_ERROR(post("save"));
    full = std::make_unique<torch::optim::AdamW>(
        params_, torch::optim::AdamWOptions(options_.learning_rate).weight_decay(0.0));
    TLT_RETURN_IF_ERROR(gather_optimizer(full.get()));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*policy_, dir + "/policy.ckpt", metadata));
  return write_optimizer(dir + "/optimizer.pt", full ? *full : *optimizer_);
}

StatusOr<std::string> PolicyTrainer::load(const std::string& dir) {
  if (!group_) {
    StatusOr<std::string> meta = model::load_checkpoint(*policy_, dir + "/policy.ckpt");
    if (!meta.ok()) return meta.status();
    TLT_RETURN_IF_ERROR(
        read_optimizer(dir + "/optimizer.pt", policy_->lm_head->weight.device(), *optimizer_));
    return meta;
  }
  TLT_RETURN_IF_ERROR(post("load"));
  StatusOr<std::string> meta = Status::Internal("not read");
  TLT_RETURN_IF_ERROR(load_shared(dir, &meta));
  return meta;
}

// Rank 0 reads the checkpoint (dir; *meta its result) and every rank takes its parameters and
// optimizer shard; the other ranks pass "" and null. A checkpoint rank 0 cannot read leaves every
// rank as it was.
Status PolicyTrainer::load_shared(const std::string& dir, StatusOr<std::string>* meta) {
  tst::Collective& c = *group_->collective();
  std::unique_ptr<torch::optim::AdamW> full;
  torch::Tensor read = torch::zeros({1}, torch::kInt64);  // (1,): 1 when rank 0 read it
  if (rank() == 0) {
    *meta = model::load_checkpoint(*policy_, dir + "/policy.ckpt");
    full = std::make_unique<torch::optim::AdamW>(
        params_, torch::optim::AdamWOptions(options_.learning_rate).weight_decay(0.0));
    Status opt =
        meta->ok() ? read_optimizer(dir + "/optimizer.pt", policy_->lm_head->weight.device(), *full)
                   : meta->status();
    if (!opt.ok()) *meta = opt;
    read[0] = meta->ok() ? 1 : 0;
  }
  TLT_RETURN_IF_ERROR(broadcast_tensor(c, read, 0));
  if (read[0].item<int64_t>() == 0) return Status::Ok();  // rank 0 returns its error
  TLT_RETURN_IF_ERROR(broadcast_from_owners(c, params_, std::vector<int>(params_.size(), 0)));
  return scatter_adam_state(c, params_, owner_, *optimizer_, full.get());
}

Status PolicyTrainer::serve(int idle_timeout_s) {
  if (!group_) return Status::FailedPrecondition("serve(): this trainer has no group");
  int waited_s = 0;
  while (true) {
    const std::string key = "trainer/command/" + std::to_string(commands_);
    StatusOr<std::string> op = group_->get(key, kCommandPollS);
    if (op.status().code() == StatusCode::kDeadlineExceeded) {
      waited_s += kCommandPollS;
      if (idle_timeout_s > 0 && waited_s >= idle_timeout_s)
        return Status::DeadlineExceeded("trainer rank " + std::to_string(rank()) +
                                        ": no command from rank 0 in " + std::to_string(waited_s) +
                                        " s");
      continue;
    }
    if (!op.ok()) return op.status();
    ++commands_, waited_s = 0;
    tst::Collective& c = *group_->collective();
    if (*op == "finish") return Status::Ok();
    if (*op == "update") {
      SequenceBatch batch;
      torch::Tensor adv;
      TLT_RETURN_IF_ERROR(broadcast_batch(c, &batch, &adv));
      TLT_RETURN_IF_ERROR(run_update(batch, adv).status);
    } else if (*op == "synchronise") {
      std::vector<torch::Tensor> all = all_parameters(policy_, reference_);
      TLT_RETURN_IF_ERROR(broadcast_from_owners(c, all, std::vector<int>(all.size(), 0)));
    } else if (*op == "save") {
      TLT_RETURN_IF_ERROR(gather_optimizer(nullptr));
    } else if (*op == "load") {
      TLT_RETURN_IF_ERROR(load_shared("", nullptr));
    } else {
      return Status::InvalidArgument("trainer rank " + std::to_string(rank()) +
                                     ": unknown command \"" + *op + "\" from rank 0");
    }
  }
}

}  // namespace tlt::rl
