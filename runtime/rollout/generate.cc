#include "runtime/rollout/generate.h"

#include <ostream>

#include "runtime/device/device.h"
#include "runtime/model/checkpoint.h"
#include "runtime/rollout/engine.h"

namespace tlt::rollout {
namespace {

std::string decode_bytes(const std::vector<int64_t>& tokens) {
  std::string s;
  for (int64_t t : tokens) {
    if (t >= 0 && t < 256) {
      s += static_cast<char>(t);
    } else {
      s += "<" + std::to_string(t) + ">";
    }
  }
  return s;
}

}  // namespace

Status run_generate(const GenerateOptions& o, std::ostream& out) {
  if (o.prompt.empty()) return Status::InvalidArgument("--prompt: must not be empty");
  if (o.copies < 1) return Status::InvalidArgument("--copies: must be >= 1");
  StatusOr<model::ModelConfig> config = model::preset_config(o.preset);
  if (!config.ok()) return config.status().with_context("--preset");
  StatusOr<device::Placement> placement =
      device::resolve_device(o.device, device::probe_inventory(), "--device");
  if (!placement.ok()) return placement.status();
  TLT_RETURN_IF_ERROR(device::make_current(placement->main_device()));
  out << placement->line() << "\n";
  model::Transformer target(*config);
  if (!o.checkpoint.empty()) {
    StatusOr<std::string> meta = model::load_checkpoint(*target, o.checkpoint);
    if (!meta.ok()) return meta.status();
  }
  target->to(torch::Device(placement->main_device()));  // the drafter follows its target
  target->eval();
  model::Drafter drafter(nullptr);
  if (o.speculative) {
    drafter = model::Drafter(target, 1);
    if (!o.drafter_checkpoint.empty()) {
      StatusOr<std::string> meta = model::load_checkpoint(*drafter, o.drafter_checkpoint);
      if (!meta.ok()) return meta.status();
    }
    drafter->eval();
  }
  EngineOptions eo;
  eo.max_batch = o.copies;
  eo.max_seq = std::min<int64_t>(config->max_seq, int64_t(o.prompt.size()) + o.max_tokens + 64);
  eo.speculative = o.speculative;
  eo.activation_threshold = o.copies;
  eo.arms = o.arms;
  eo.seed = o.seed;
  StatusOr<std::unique_ptr<Engine>> engine = Engine::create(target, drafter, eo);
  if (!engine.ok()) return engine.status();
  std::vector<Request> reqs;
  for (int32_t i = 0; i < o.copies; ++i) {
    Request r;
    r.id = i;
    for (unsigned char c : o.prompt) r.prompt.push_back(c);
    r.max_new_tokens = o.max_tokens;
    r.sampling = {o.temperature, o.top_p};
    r.seed = o.seed + uint64_t(i);
    reqs.push_back(std::move(r));
  }
  StatusOr<std::vector<Completion>> done = (*engine)->generate(reqs);
  if (!done.ok()) return done.status();
  for (const Completion& c : *done) out << o.prompt << decode_bytes(c.tokens) << "\n";
  const EngineStats& st = (*engine)->stats();
  out << "generated=" << st.tokens << " seconds=" << st.seconds
      << " tokens_per_s=" << (st.seconds > 0 ? st.tokens / st.seconds : 0.0)
      << " plain_steps=" << st.plain_steps << " spec_steps=" << st.spec_steps
      << " accept_length=" << st.accept_length() << "\n";
  return Status::Ok();
}

}  // namespace tlt::rollout
