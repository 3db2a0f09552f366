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

#include <iosfwd>
#include <string>

namespace tlt::rl {

// Runs the worker loop on file descriptors in/out. Returns the process exit code. With
// `mirror_dir` set (a remote worker on its own machine: one socket, in_fd == out_fd), files the
// messages name travel over the channel and live under mirror_dir (runtime/rl/channel.h).
int run_worker(int in_fd, int out_fd, const std::string& mirror_dir = "");

// A cluster job's rollout pod (`tlt run-role`): creates work_dir/buffer, reads the job secret
// (cluster::load_job_secret), connects to the trainer at host:port as worker `index` proving it
// (runtime/rl/rendezvous.h; retrying for up to 10 minutes while the trainer starts) and serves
// it until it says exit or hangs up; the files it is sent live under work_dir. Progress lines go
// to `out`, errors to `err`. Returns the process exit code (1 when the directory, the secret or
// the connection fails, or the trainer refuses the proof).
int run_remote_worker(const std::string& host, int port, int index, const std::string& work_dir,
                      std::ostream& out, std::ostream& err);

}  // namespace tlt::rl
