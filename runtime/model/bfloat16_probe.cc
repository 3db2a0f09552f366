#include "runtime/model/bfloat16_probe.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "runtime/model/precision.h"
#include "runtime/model/transformer.h"

namespace tlt::model {

namespace {

// The probed request's context and the next request's extra context at full size: the case of
// Bfloat16Inference.AVerifyForwardEqualsOneTokenStepsBitForBit (tests/runtime).
constexpr int64_t kPrefix = 71, kFurther = 113;
// Requests in the largest shape, and the most tokens of the shapes every probe runs.
constexpr int64_t kRequests = 16, kTokens = 16;
// Verify forwards past kTokens tokens (the largest arms', up to the 64 an RLJob's draft headroom
// allows), probed where max_seq leaves room.
constexpr std::array<int64_t, 4> kLongVerifies{24, 32, 48, 64};
// The least context a probe runs on; below it decoding stays float32.
constexpr int64_t kMinPrefix = 16;

// Tokens (1, n) of a probe: a fixed spread over the vocabulary (no RNG touched).
torch::Tensor probe_tokens(int64_t n, int64_t offset, int64_t vocab) {
  return ((torch::arange(offset, offset + n, torch::kInt64) * 7919) % vocab).view({1, n});
}

// The probed request's context and its one-token steps' tokens.
torch::Tensor prefix_tokens(const DecodeProbe& p, int64_t vocab) {
  return probe_tokens(p.prefix, 1 + 1009 * p.seed, vocab);
}
torch::Tensor step_tokens(const DecodeProbe& p, int64_t vocab) {
  return probe_tokens(p.steps, 3 + 1013 * p.seed, vocab);
}

torch::Device device_of(Transformer& m) {
  return m->lm_head->weight.device();
}

// Logits (steps, V) of the probe's tokens fed one at a time to the probed request alone.
torch::Tensor reference_logits(Transformer& m, const DecodeProbe& p) {
  int64_t vocab = m->config().vocab;
  torch::Device dev = device_of(m);
  torch::Tensor prefix = prefix_tokens(p, vocab), tokens = step_tokens(p, vocab);
  auto cache = m->make_cache(1, p.span);
  cache->add_slot();
  m->forward(prefix.to(dev),
             sequential_positions(torch::zeros({1}, torch::kInt64), p.prefix).to(dev), cache.get());
  cache->commit_prefix(0, p.prefix);
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < p.steps; ++i) {
    ForwardResult r =
        m->forward(tokens.narrow(1, i, 1).to(dev),
                   torch::full({1, 1}, p.prefix + i, torch::kInt64).to(dev), cache.get());
    cache->commit_prefix(0, 1);
    rows.push_back(r.logits[0][0]);  // (V,)
  }
  return torch::stack(rows);  // (steps, V)
}

// The most requests of any shape of `p`.
int64_t most_requests(const DecodeProbe& p) {
  int64_t n = 1;
  for (const DecodeShape& s : p.shapes) n = std::max(n, s.requests);
  return n;
}

// A cache of most_requests(p) requests, each prefilled alone: request 0 with the probed context,
// request i with prefix + longer[i - 1] tokens of its own. Forwards after this commit nothing,
// so every shape runs on the same contexts.
std::unique_ptr<KVCache> prefilled_batch(Transformer& m, const DecodeProbe& p) {
  int64_t slots = most_requests(p), vocab = m->config().vocab;
  torch::Device dev = device_of(m);
  auto cache = m->make_cache(slots, p.span);
  for (int64_t b = 0; b < slots; ++b) {
    cache->add_slot();
    torch::Tensor context = b == 0 ? prefix_tokens(p, vocab)
                                   : probe_tokens(p.prefix + p.longer[size_t(b - 1)],
                                                  2 + b + 1019 * p.seed, vocab);  // (1, n)
    int64_t n = context.size(1);
    cache->focus(b, 1);
    m->forward(context.to(dev), sequential_positions(torch::zeros({1}, torch::kInt64), n).to(dev),
               cache.get());
    cache->unfocus();
    cache->commit_prefix(b, n);
  }
  return cache;
}

// Logits (T, V) of request 0's first T step tokens in one forward of `shape` over `cache`
// (prefilled_batch), every other request with T tokens of its own.
torch::Tensor first_request_logits(Transformer& m, const DecodeProbe& p, KVCache* cache,
                                   const DecodeShape& shape) {
  int64_t t = shape.tokens, vocab = m->config().vocab;
  torch::Device dev = device_of(m);
  std::vector<int64_t> lengths;
  std::vector<torch::Tensor> toks;
  for (int64_t b = 0; b < shape.requests; ++b) {
    lengths.push_back(cache->length(b));
    toks.push_back(b == 0 ? step_tokens(p, vocab).narrow(1, 0, t)
                          : probe_tokens(t, 7 + b + 1021 * p.seed, vocab));  // (1, T)
  }
  cache->focus(0, shape.requests);
  torch::Tensor pos = sequential_positions(torch::tensor(lengths), t).to(dev);  // (R, T)
  torch::Tensor logits = m->forward(torch::cat(toks).to(dev), pos, cache).logits[0];
  cache->unfocus();
  return logits;  // (T, V)
}

void add_shape(std::vector<DecodeShape>* shapes, int64_t requests, int64_t tokens) {
  for (const DecodeShape& s : *shapes)
    if (s.requests == requests && s.tokens == tokens) return;
  shapes->push_back({requests, tokens});
}

// Reads TLT_TEST_BF16_DECODE_ROWS once: the padding bfloat16_decode_rows() is forced to, or -1.
int64_t forced_decode_rows() {
  static const int64_t forced = [] {
    const char* v = std::getenv("TLT_TEST_BF16_DECODE_ROWS");
    return v != nullptr && *v != '\0' ? std::max<int64_t>(0, std::atoll(v)) : int64_t(-1);
  }();
  return forced;
}

}  // namespace

std::string describe(const DecodeShape& shape) {
  return std::to_string(shape.requests) + (shape.requests == 1 ? " request x " : " requests x ") +
         std::to_string(shape.tokens) + (shape.tokens == 1 ? " token" : " tokens");
}

DecodeProbe decode_probe(const ModelConfig& c) {
  DecodeProbe p;
  // Contexts scaled into max_seq less the longest verify forward's tokens, or where that leaves
  // too little, less the common shapes' (the longer forwards are then left out).
  int64_t room = std::min(kPrefix + kFurther, c.max_seq - kLongVerifies.back());
  if (kPrefix * room / (kPrefix + kFurther) < kMinPrefix)
    room = std::min(kPrefix + kFurther, c.max_seq - kTokens);
  p.prefix = kPrefix * room / (kPrefix + kFurther);
  if (p.prefix < kMinPrefix) return p;
  int64_t further = room - p.prefix;
  p.longer.push_back(further);
  for (int64_t i = 2; i < kRequests; ++i) p.longer.push_back(std::min(further, 2 + 3 * i));
  p.span = std::min(c.max_seq, room + kLongVerifies.back());
  int64_t fits = p.span - room;  // the most tokens a shape may have
  for (int64_t b = 2; b <= kRequests; ++b) add_shape(&p.shapes, b, 1);
  for (int64_t t = 2; t <= kTokens; ++t) add_shape(&p.shapes, 2, t);
  for (int64_t t : {3, 5, 8}) add_shape(&p.shapes, 4, t);
  add_shape(&p.shapes, 6, 8);
  add_shape(&p.shapes, kRequests, 8);
  for (int64_t t : kLongVerifies) {
    if (t > fits) continue;
    add_shape(&p.shapes, 2, t);
    add_shape(&p.shapes, 4, t);
  }
  p.steps = 1;
  for (const DecodeShape& s : p.shapes) p.steps = std::max(p.steps, s.tokens);
  return p;
}

std::vector<DecodeMismatch> decode_mismatches(Transformer& model, int64_t min_rows,
                                              const DecodeProbe& probe, bool stop_at_first) {
  torch::NoGradGuard no_grad;
  Bfloat16Inference bfloat16(true, min_rows);
  std::vector<DecodeMismatch> out;
  if (probe.shapes.empty()) return out;
  torch::Tensor reference = reference_logits(model, probe);  // (steps, V)
  auto cache = prefilled_batch(model, probe);
  for (const DecodeShape& shape : probe.shapes) {
    torch::Tensor got = first_request_logits(model, probe, cache.get(), shape);  // (T, V)
    torch::Tensor want = reference.narrow(0, 0, shape.tokens);                   // (T, V)
    if (torch::equal(want, got)) continue;
    out.push_back({shape, (want - got).abs().max().item<double>()});
    if (stop_at_first) break;
  }
  return out;
}

std::vector<int64_t> decode_paddings() {
  return {1, Bfloat16Inference::kTileRows};
}

int64_t bfloat16_decode_rows(Transformer& model) {
  return bfloat16_decode_precision(model).rows;
}

DecodePrecision bfloat16_decode_precision(Transformer& model) {
  if (forced_decode_rows() >= 0) {
    int64_t rows = forced_decode_rows();
    return {rows, std::string(rows > 0 ? "bfloat16 products" : "float32") +
                      ": TLT_TEST_BF16_DECODE_ROWS=" + std::to_string(rows)};
  }
  static std::mutex mu;
  static std::map<std::string, DecodePrecision> known;  // model shape and device -> answer
  const ModelConfig& c = model->config();
  std::string key = std::to_string(c.vocab) + "/" + std::to_string(c.dim) + "/" +
                    std::to_string(c.n_layers) + "/" + std::to_string(c.n_heads) + "/" +
                    std::to_string(c.n_kv_heads) + "/" + std::to_string(c.ffn) + "/" +
                    std::to_string(int(c.qkv_bias)) + "/" + std::to_string(c.max_seq) + "/" +
                    device_of(model).str();
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  DecodeProbe probe = decode_probe(c);
  const std::string where = device_of(model).str();
  DecodePrecision answer;
  if (probe.shapes.empty()) {
    answer.reason = "float32: max_seq " + std::to_string(c.max_seq) +
                    " leaves the probe too little context to check bfloat16 products";
  } else {
    std::string differ;  // the first disagreeing shape of each padding tried
    for (int64_t r : decode_paddings()) {
      std::vector<DecodeMismatch> bad = decode_mismatches(model, r, probe, true);
      if (bad.empty()) {
        answer.rows = r;
        answer.reason = std::string("bfloat16 products, ") +
                        (r <= 1 ? "unpadded" : "padded to " + std::to_string(r) + " rows") + ": " +
                        std::to_string(probe.shapes.size()) +
                        " verify and batched forwards give the bits of one-token steps on " + where;
        break;
      }
      char by[32];
      std::snprintf(by, sizeof by, "%.3g", bad[0].max_difference);
      differ += std::string(differ.empty() ? "" : ", ") + describe(bad[0].shape) + " by " + by +
                (r <= 1 ? " unpadded" : " padded to " + std::to_string(r) + " rows");
    }
    if (answer.rows == 0)
      answer.reason =
          "float32: with bfloat16 products " + differ + " differ from one-token steps on " + where;
  }
  known[key] = answer;
  return answer;
}

}  // namespace tlt::model
