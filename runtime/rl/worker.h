// A rollout worker process of an RLJob (the `tlt rl-worker` subcommand, spawned by the job
// driver in runtime/rl/run.h). It talks to the driver over stdin/stdout (runtime/rl/channel.h):
//
//   setup     -> (nothing)   model shape (a preset's name, or a pretrained policy's model card:
//                            its architecture only), engine options, pinning; loads nothing yet
//   generate  -> generated   loads the named policy and drafter versions if they changed, runs
//                            the requests through the rollout engine and, when asked, writes every
//                            position's (token, final hidden state) to a buffer file
//   train     -> trained     the adaptive drafter's spot trainer: trains on the named buffer files
//                            until a `stop` arrives, checked at every optimizer-step boundary,
//                            then saves its drafter and reports how long stopping took
//   exit                     returns 0
//
// Weights only change between `generate` messages, so no response mixes two policy versions.
// Errors go to stderr and the process exits non-zero; the driver restarts it.
//
// Thread safety: single-threaded process (LibTorch intra-op threads set to 1 when pinned).
#pragma once

#include <string>

namespace tlt::rl {

// Runs the worker loop on file descriptors in/out. Returns the process exit code. With
// `mirror_dir` set (a remote worker on its own machine: one socket, in_fd == out_fd), files the
// messages name travel over the channel and live under mirror_dir (runtime/rl/channel.h).
int run_worker(int in_fd, int out_fd, const std::string& mirror_dir = "");

}  // namespace tlt::rl
