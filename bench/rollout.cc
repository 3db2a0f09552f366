// bench/rollout: tokens/s of plain vs adaptive speculative decoding, side by side in one run.
//
// 1. Target: a preset trained with next-token loss on the tokenized corpus (the State of the
//    Union by default), cached; never a random model, whose speculation numbers mean nothing.
// 2. Drafter: warm-started as an RLJob on that checkpoint (spec.model.path) warm-starts its drafter
//    (rl::load_or_train_drafter_on_generations, cached), on the target's own sampled answers to
//    windows of the training documents.
// 3. For each batch size, the same requests (held-out prompts, long responses) decode plainly
//    and with the adaptive engine (bandit over the arms; plain above the threshold), on one
//    thread, as a rollout worker that owns one core would. Prints the ratios and the accepted
//    length per arm.
//    Before that, the speculation ceiling: what verifying k tokens per request costs against k
//    plain steps, the most any drafter could gain on this machine at each batch size.
//
// With --model PATH (a llama/qwen2 GGUF file or Hugging Face directory, runtime/model/
// pretrained.h): the pretrained model's load time and peak RSS, then its forward times of 1, 8
// and 16 new tokens per request at each batch size over a 256-position KV cache, and
// k x T(b,1)/T(b,k) at k = 8, and what bfloat16 products and a GRPO group's shared prompt buy
// the policy update (all with --ceiling-only). Then the drafter, warm-started on the
// model's own sampled answers to arithmetic-cot's training problems
// (rl::load_or_train_drafter_on_generations, cached), and step 3 on the task's held-out prompts
// rendered through the model's chat template, each response ending at the model's end token or
// --max-new: what an RLJob on this model decodes. No corpus.
//
// Usage: bench_rollout --tokens FILE [--preset small] [--train-steps 400] [--drafter-steps 400]
//                      [--drafter-prompts 64] [--drafter-levels 3] [--drafter-vocab 0]
//                      [--batches 1,4,16,64] [--max-new 192] [--threads 1]
//                      [--ngram-shortcut 3] [--warmup-batches 1] [--fixed-batches 1,16]
//                      [--waves 3] [--repeats 2] [--show-bandit]
//                      [--selector-value throughput] [--catch-up-limit 8]
//                      [--draft-confidence 0] [--epsilon 0.1] [--group 1] [--ceiling-only]
//                      [--dtype auto]
//        bench_rollout --model PATH --ceiling-only [--batches 1,4,16] [--threads 1]
// Every form takes --device auto|cpu|cuda|cuda:N (the target, its caches, the drafters and the
// engines there; main prints the device line first).
//        bench_rollout --model PATH --greedy-check [--batches 1,4,16] [--max-new 24]
//                      [--arms 4_1_5,4_2_8,ngram] [--dtype auto] (bench/rollout_lossless.h; exits
//                      1 when a response differs from plain decoding's)
//        bench_rollout --model PATH [--max-new 128] [--waves 2] [--drafter-steps 1600]
//                      [--drafter-prompts 384] [--drafter-levels 3] [--drafter-layers 1]
//                      [--drafter-vocab 2048] [--drafter-features last|fused|both]
//                      [--drafter-temperature -1] [--temperatures 0,0.7,1]
//                      [--coupled-drafts 1] [--coupling-noise 1] [the decoding flags above]
// --drafter-features both: the `last` and the fused (EAGLE-3) drafter, each warm-started on the
// same generations, measured against the same plain runs; with --temperatures, one table per
// temperature and then a summary of accept length and ratio to plain per drafter, batch size and
// arm (the adaptive engine, and each arm alone at --fixed-batches) side by side.
// This file holds main, which parses the flags into one RolloutOptions (rollout_options.h) and
// hands it to the benchmark it runs: the preset's (rollout_preset.h), a real model's ceilings and
// training costs or its decode ratios (rollout_model.h), or the greedy check (rollout_lossless.h).
// The decode ratios are rollout_compare.h, the ceilings rollout_ceiling.h, the precision of the
// update and the drafter's training rollout_precision.h, the update's prompt sharing
// rollout_sharing.h, the drafters' warm start (the jobs') rollout_drafter.h.
#include <cstdio>

#include "bench/rollout_lossless.h"
#include "bench/rollout_model.h"
#include "bench/rollout_options.h"
#include "bench/rollout_preset.h"
#include "runtime/cpu_info.h"
#include "runtime/device/device.h"

namespace {

using namespace tlt;

// --model PATH --greedy-check with the resolved flags (GreedyCheckOptions' defaults where none
// were given).
int greedy_check(const bench::RolloutOptions& o) {
  bench::GreedyCheckOptions g;
  g.batches = o.table.batches, g.arms = o.table.arms, g.max_new = o.table.max_new;
  g.bfloat16 = o.table.decode.bfloat16, g.threads = o.table.threads, g.device = o.device;
  return bench::greedy_check(o.model_path, g);
}

// A --model run: the ceilings, the greedy check or the decode ratios. The exit code.
int run_model(const bench::RolloutOptions& o) {
  if (o.ceiling_only) return bench::model_ceiling(o);
  if (o.greedy_check) return greedy_check(o);
  return bench::model_compare(o);
}

}  // namespace

int main(int argc, char** argv) {
  bench::RolloutOptions o;
  if (int rc = bench::parse_rollout_flags(argc, argv, &o); rc >= 0) return rc;
  if (Status st = device::make_current(o.device); !st.ok()) {
    std::fprintf(stderr, "--device: %s\n", st.message().c_str());
    return 2;
  }
  std::printf("cpu: %s\n%s\ndecoding: %s products (--dtype %s)\n",
              runtime::describe(runtime::cpu_info()).c_str(), o.device_line.c_str(),
              o.table.decode.bfloat16 ? "bfloat16" : "float32", o.dtype.c_str());
  if (!o.model_path.empty()) return run_model(o);
  return bench::preset_compare(o);
}
