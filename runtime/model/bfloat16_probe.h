// The probe behind bfloat16 decoding on a CPU or a GPU: whether, on this device and this model's
// shapes,
// the forwards decoding really runs give a request the bits its one-token steps alone give it,
// with products padded to which row count (model::Bfloat16Inference, runtime/model/precision.h).
// Row-invariance of the library's bfloat16 products is measured, not promised: the kernels a
// product takes depend on its rows, and on some CPUs (AMX's tiles, AVX512-BF16's vectors) small
// products take other kernels than large ones. The engine asks before decoding in bfloat16, and
// the tests check the decision with the same function plus shapes of their own.
//
// Thread safety: bfloat16_decode_rows() is thread-safe; decode_mismatches() uses the model (no
// other thread may run it meanwhile) and changes nothing in it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/config.h"

namespace tlt::model {

class Transformer;  // runtime/model/transformer.h

// One forward decoding runs: `requests` requests over one cache (the probed one first, the
// others with longer contexts of their own), each with `tokens` new tokens: a batched one-token
// step at tokens = 1, a verify forward of a draft (its own for every request) otherwise.
struct DecodeShape {
  int64_t requests = 1;
  int64_t tokens = 1;
};

// What a probe runs: the probed request's context (`prefix` tokens) and one-token steps of it
// alone (`steps` of them) are the reference; every shape's forward over a cache holding it and
// the other requests (request i > 0 has prefix + longer[i - 1] tokens of context) must give its
// first request, token for token, the reference's logits bit for bit.
struct DecodeProbe {
  int64_t span = 0;             // positions per request of the caches
  int64_t prefix = 0;           // the probed request's context
  std::vector<int64_t> longer;  // extra context of requests 1, 2, ... over `prefix`
  int64_t steps = 0;            // the reference's one-token steps: the most tokens of a shape
  std::vector<DecodeShape> shapes;
  // The probe's tokens are a fixed spread over the vocabulary starting here: another seed runs
  // the same shapes on other tokens.
  int64_t seed = 0;
};

// The probe bfloat16_decode_rows() runs for a model of config `c`:
//  - one-token steps of 1 request (the reference) and of 2 to 16 requests together;
//  - verify forwards of 2 to 16 tokens next to one request 113 tokens further on (at 8 tokens:
//    Bfloat16Inference.AVerifyForwardEqualsOneTokenStepsBitForBit's exact case), and of 3, 5
//    and 8 tokens next to 3 others, 8 next to 5 and next to 15 others;
//  - verify forwards of 24, 32, 48 and 64 tokens (the largest arms') next to 1 and to 3 others.
// Every arm an engine may run verifies one of these token counts (up to 64), and the probe does
// not depend on the arms: plain and speculative engines on one model decode with the same
// products, so their outputs agree. Contexts: 71 tokens for the probed request, 113 more for the
// next, 8 to 47 more for the others, scaled down where max_seq is shorter; token counts that no
// longer fit are left out. No shapes when max_seq leaves fewer than 16 tokens of context (then
// decoding stays float32).
DecodeProbe decode_probe(const ModelConfig& c);

// A shape whose first request's logits differ from the reference's.
struct DecodeMismatch {
  DecodeShape shape;
  double max_difference = 0;  // over its tokens' logits
};

// Runs `probe` on `model` under Bfloat16Inference(true, min_rows) (no autograd; scratch caches,
// the model is not changed): the shapes that disagree with the reference, in probe order (only
// the first with `stop_at_first`); empty when all agree bit for bit. Throws c10::Error where the
// model cannot run the probe's shapes.
std::vector<DecodeMismatch> decode_mismatches(Transformer& model, int64_t min_rows,
                                              const DecodeProbe& probe, bool stop_at_first = false);

// The paddings bfloat16_decode_rows() tries, in order: unpadded products (a one-token step pays
// for its own rows only), then padded to Bfloat16Inference::kTileRows.
std::vector<int64_t> decode_paddings();

// The padding with which decoding `model` on this machine under Bfloat16Inference is
// row-invariant: the first of decode_paddings() for which decode_mismatches(model, padding,
// decode_probe(config)) is empty; 0 when none is, or the probe has no shapes (decode in
// float32). Probes once per process, model shape and device: 43 forwards, 64 one-token steps and
// the contexts' prefill, about 20 s single-threaded for SmolLM2-135M on a 2-vCPU AMD EPYC VM
// (bench_rollout --greedy-check prints it); thread-safe.
// Test hook: TLT_TEST_BF16_DECODE_ROWS=N (read once per process) makes it return N without
// probing, so a test can force a padding the probe would reject and show what catches it.
int64_t bfloat16_decode_rows(Transformer& model);

// bfloat16_decode_rows()'s answer for `model` with its reason, for the log (the same probe, run
// once per process, model shape and device), e.g.
//   "bfloat16 products, unpadded: 43 verify and batched forwards give the bits of one-token
//    steps on cuda:0"
//   "float32: with bfloat16 products 2 requests x 3 tokens by 0.0156 unpadded, 4 requests x 3
//    tokens by 0.0078 padded to 16 rows differ from one-token steps on cuda:0"
struct DecodePrecision {
  int64_t rows = 0;  // as bfloat16_decode_rows(): 0 decodes in float32
  std::string reason;
};
DecodePrecision bfloat16_decode_precision(Transformer& model);

// "1 request x 8 tokens" for messages.
std::string describe(const DecodeShape& shape);

}  // namespace tlt::model
