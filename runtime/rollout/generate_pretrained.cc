#include "runtime/rollout/generate_pretrained.h"

#include <chrono>
#include <fstream>
#include <ostream>

#include "runtime/device/device.h"
#include "runtime/model/pretrained.h"
#include "runtime/rollout/engine.h"
#include "runtime/tokenizer/hf_tokenizer.h"

namespace tlt::rollout {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

StatusOr<std::vector<int64_t>> prompt_ids(const GenerateOptions& o,
                                          const tokenizer::Tokenizer& tok) {
  if (!o.chat.empty()) return tok.encode_chat({{"user", o.chat}});
  if (o.prompt.empty()) return Status::InvalidArgument("--prompt: must not be empty");
  return tok.encode_prompt(o.prompt);
}

}  // namespace

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM: N kB"
  }
  return 0;
}

Status run_generate_pretrained(const GenerateOptions& o, std::ostream& out, std::ostream& log) {
  StatusOr<device::Placement> placement =
      device::resolve_device(o.device, device::probe_inventory(), "--device");
  if (!placement.ok()) return placement.status();  // before the model is read
  TLT_RETURN_IF_ERROR(device::make_current(placement->main_device()));
  log << placement->line() << "\n";
  auto t0 = std::chrono::steady_clock::now();
  StatusOr<model::PretrainedModel> m = model::load_pretrained(o.model);
  if (!m.ok()) return m.status();
  m->model->to(torch::Device(placement->main_device()));  // its KV cache and engine follow
  StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::load_tokenizer(o.model);
  if (!tok.ok()) return tok.status();
  const model::ModelConfig& c = m->config.config;
  if (Status fits = (*tok)->check_fits(c.vocab); !fits.ok())
    return Status::InvalidArgument(o.model + ": " + fits.message());
  double load_s = seconds_since(t0);
  StatusOr<std::vector<int64_t>> ids = prompt_ids(o, **tok);
  if (!ids.ok()) return ids.status();
  if (ids->empty()) return Status::InvalidArgument("the prompt encodes to no tokens");
  if (o.verbose) {
    log << "model=" << o.model << " architecture=" << m->config.architecture
        << " layers=" << c.n_layers << " dim=" << c.dim << " vocab=" << c.vocab
        << " load_seconds=" << load_s << " peak_rss_mb=" << peak_rss_bytes() / (1 << 20)
        << " prompt_tokens=" << ids->size() << "\n";
  }
  EngineOptions eo;
  eo.max_batch = 1;
  eo.max_seq = std::min<int64_t>(c.max_seq, int64_t(ids->size()) + o.max_tokens + 64);
  // No drafter is trained for the model here, so Engine::create leaves out the arms that need
  // one: --speculative runs the drafter-free arms (ngram, ngram_D). The tokens stay plain's.
  eo.speculative = o.speculative;
  eo.activation_threshold = 1;
  eo.arms = o.arms;
  eo.seed = o.seed;
  StatusOr<std::unique_ptr<Engine>> engine = Engine::create(m->model, model::Drafter(nullptr), eo);
  if (!engine.ok()) return engine.status();
  Request r;
  r.prompt = *ids;
  r.max_new_tokens = o.max_tokens;
  r.more_stop_tokens = (*tok)->end_ids();
  r.sampling = {o.temperature, o.top_p};
  r.seed = o.seed;
  StatusOr<std::vector<Completion>> done = (*engine)->generate({r});
  if (!done.ok()) return done.status();
  StatusOr<std::string> text = (*tok)->decode((*done)[0].tokens, /*skip_special=*/true);
  if (!text.ok()) return text.status();
  out << *text << "\n";
  const EngineStats& st = (*engine)->stats();
  log << "generated=" << st.tokens << " seconds=" << st.seconds
      << " tokens_per_s=" << (st.seconds > 0 ? st.tokens / st.seconds : 0.0)
      << " stopped=" << ((*done)[0].stopped ? "end-token" : "max-tokens")
      << " plain_steps=" << st.plain_steps << " spec_steps=" << st.spec_steps
      << " accept_length=" << st.accept_length() << " peak_rss_mb=" << peak_rss_bytes() / (1 << 20)
      << "\n";
  return Status::Ok();
}

}  // namespace tlt::rollout
