// Checkpoints of modules (target, drafter) that refuse to load anything but what was saved.
//
// Layout: "TLTCKPT1", u32 length + metadata text, u64 payload length, u64 FNV-1a 64 checksum of
// the payload, payload (a LibTorch archive of every parameter and buffer by name). A file is
// written to a temporary file of its own next to PATH (PATH.tmp.PID.N) and renamed, so a crash
// never leaves a half-written checkpoint under PATH, and writers racing to save the same PATH
// (two jobs training one cached warm start) each put a whole file there, the last one winning.
// Loading checks the magic, lengths and checksum, then every tensor's name, shape and dtype
// before copying anything, so a failed load leaves the module unchanged.
//
// Thread safety: functions; the module must not be used by other threads during a load.
#pragma once

#include <torch/torch.h>

#include <string>

#include "api/status.h"
#include "runtime/io/atomic_file.h"

namespace tlt::model {

// Writes `module` with `metadata` (free text, e.g. the model config) to `path`, whole or not
// at all (io::atomic_write). `sync`: kData (the default) for checkpoints and caches that must
// survive the machine; kNone for files a run republishes every step (the policy and drafters
// handed to workers), which a crash loses with the step anyway.
// Unavailable when the file cannot be written.
Status save_checkpoint(const torch::nn::Module& module, const std::string& path,
                       const std::string& metadata, io::Sync sync = io::Sync::kData);

// Loads `path` into `module` and returns the metadata. NotFound when the file is missing;
// Corruption when it is truncated, fails its checksum, or is not a tlt checkpoint;
// InvalidArgument when a tensor is missing or has another shape or dtype than the module's.
StatusOr<std::string> load_checkpoint(torch::nn::Module& module, const std::string& path);

// Reads only the metadata (cheap: the payload is checked but not decoded).
StatusOr<std::string> read_checkpoint_metadata(const std::string& path);

// One tensor of the checkpoint by name (e.g. "embed.weight"), without a module. NotFound when the
// checkpoint has no such tensor; errors of load_checkpoint otherwise.
StatusOr<torch::Tensor> read_checkpoint_tensor(const std::string& path, const std::string& name);

}  // namespace tlt::model
