// The layout of an RL run's directory: RLRunPlan::run_dir on the driver, the setup message's
// `dir` on a worker (the same directory for a local worker; a remote worker's own, into which
// the files messages name are mirrored: runtime/rl/channel.h).
//
//   policy-v<V>.ckpt          policy version V, written by the trainer for the workers to load
//   drafter-v<V>.ckpt         drafter version V (the merged drafter), likewise
//   drafter-w<W>.ckpt         worker W's drafter after it trained (its part of the next merge)
//   buffer/step-<S>-w<W>.pt   the hidden states worker W collected in step S (drafter training)
//   weight-sync/              a local weight-sync group's store files (private: 0700)
//
// Every name is spelled here once. The *_name functions take the number as text, so that the
// Channel's mirror rules spell their patterns with them ('#' for any number).
//
// No LibTorch, no library: the fuzz target's messages.cc uses it too.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace tlt::rl {

// Names relative to the run directory.
inline std::string policy_name(const std::string& version) {
  return "policy-v" + version + ".ckpt";
}
inline std::string drafter_name(const std::string& version) {
  return "drafter-v" + version + ".ckpt";
}
inline std::string worker_drafter_name(const std::string& worker) {
  return "drafter-w" + worker + ".ckpt";
}
inline constexpr const char* kBufferDir = "buffer";
inline std::string buffer_name(const std::string& step, const std::string& worker) {
  return std::string(kBufferDir) + "/step-" + step + "-w" + worker + ".pt";
}
inline constexpr const char* kWeightSyncDir = "weight-sync";

// Paths under `dir`.
inline std::string policy_path(const std::string& dir, int64_t version) {
  return dir + "/" + policy_name(std::to_string(version));
}
inline std::string drafter_path(const std::string& dir, int64_t version) {
  return dir + "/" + drafter_name(std::to_string(version));
}
inline std::string worker_drafter_path(const std::string& dir, int64_t worker) {
  return dir + "/" + worker_drafter_name(std::to_string(worker));
}
inline std::string buffer_dir(const std::string& dir) {
  return dir + "/" + kBufferDir;
}
inline std::string buffer_path(const std::string& dir, int64_t step, int64_t worker) {
  return dir + "/" + buffer_name(std::to_string(step), std::to_string(worker));
}
inline std::string weight_sync_dir(const std::string& dir) {
  return dir + "/" + kWeightSyncDir;
}

}  // namespace tlt::rl
