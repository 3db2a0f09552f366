// Running a whole pretraining job (TST or its next-token baseline) from tokenized documents:
// the entry point `tlt run` uses for a TSTPretrainJob, in one process or as one rank of a
// data-parallel group (runtime/tst/group.h). LibTorch stays behind this header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::tst {

class Collective;  // runtime/tst/data_parallel.h

struct RunPlan {
  std::string preset = "tiny";
  // spec.model.path/format (runtime/model/model_source.h): when model_path is set the run starts
  // from that model (pretrained weights, a tlt checkpoint, or a config.json's architecture from
  // scratch) instead of `preset`.
  std::string model_path, model_format = "auto";
  std::string model_dtype = "auto";  // spec.model.dtype (model::use_bfloat16)
  // This rank's device, "cpu" or "cuda:K" (runtime/device/device.h: spec.model.device resolved,
  // then the rank's round-robin share): the model, its optimizer state and every batch live there.
  std::string device = "cpu";
  int64_t vocab = 4096;  // the data's vocabulary; must not exceed the model's embedding rows
  // The data's tokenizer when it is a Hugging Face one (tokenizer.json, HF directory or GGUF):
  // recorded in the model card (model.json) beside every checkpoint, for `tlt export`.
  std::string tokenizer_source;
  int64_t steps = 300, warmup = 30;
  double decay_fraction = 0.2, learning_rate = 1e-3, weight_decay = 0.1, grad_clip = 1.0;
  bool superposition = true;
  int64_t bag = 4;
  double ratio = 0.3;
  std::string weighting = "uniform";
  int64_t batch = 16, positions = 128;
  int64_t eval_every = 50, eval_batches = 4;
  uint64_t seed = 0;
  std::string checkpoint_dir;  // empty: no checkpoints
  int64_t checkpoint_every = 0;
  bool resume = false;  // continue from checkpoint_dir when it holds a state
};

struct Point {
  int64_t step = 0;  // steps done
  std::string phase;
  double loss = 0, lr = 0, flops = 0, seconds = 0;
  int64_t tokens_seen = 0;
  double eval_loss = -1;  // held-out next-token loss, when evaluated at this step
};

// Trains and evaluates; calls on_point after every step. Every checkpoint directory also gets the
// model card (model.json: the architecture and tokenizer; runtime/model/model_source.h). Returns
// the evaluated points (the first before any step, the last after the final step). InvalidArgument
// for a bad plan (among them a vocabulary larger than the model's embedding, or seqLen beyond its
// context); the model's own errors (NotFound, Corruption, InvalidArgument) name spec.model.path.
// group (borrowed; null: one process): every rank calls this with the same plan and documents;
// each trains on its shard of every global batch, all hold the same weights after every step,
// points carry global-batch losses on every rank, and only rank 0 writes checkpoints (every
// rank resumes from checkpoint_dir, which must be storage they all see). Unavailable when a
// peer is gone; FailedPrecondition when the ranks disagree on the step or the plan; Internal for
// an exception from LibTorch.
StatusOr<std::vector<Point>> run_pretraining(const RunPlan& plan,
                                             std::vector<std::vector<int32_t>> train_docs,
                                             std::vector<std::vector<int32_t>> held_out_docs,
                                             const std::function<void(const Point&)>& on_point,
                                             Collective* group = nullptr);

}  // namespace tlt::tst
