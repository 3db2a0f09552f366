// Data parallelism for TST pretraining: R ranks (processes, or threads in tests) each run the
// model on their shard of every global batch and sum their gradients, so that all ranks take the
// optimizer step the single process would take on the whole batch.
//
// What it leaves out: no bucketing or overlap of communication with the backward (one flat
// buffer per step, after the backward), no sharded optimizer state, no model parallelism.
//
// Backends (c10d): Gloo for CPU tensors; NCCL for CUDA tensors in the GPU flavour only (TLT_GPU
// and a LibTorch built with USE_C10D_NCCL: it is not compiled in the CPU build). Without Gloo
// headers at build time (Debian: libgloo-dev) the factories return Unimplemented.
//
// Shapes: B global batch rows, B_r rows of rank r, n tokens per row.
#pragma once

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "api/status.h"

namespace tlt::tst {

// Collective operations among the ranks of one group. Every rank must make the same calls, in
// the same order, with tensors of the same shape and dtype (on the backend's device).
// Errors: Unavailable when a peer is gone (its connection closed) or the group's timeout passed
// (a stuck peer); the group is unusable afterwards.
// Thread safety: one thread at a time per object (each rank has its own object).
class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // In place: every rank's `t` becomes the elementwise sum of all ranks' `t` (contiguous).
  virtual Status all_reduce_sum(torch::Tensor& t) = 0;
  // In place: every rank's `t` becomes rank `root`'s `t` (contiguous).
  virtual Status broadcast(torch::Tensor& t, int root) = 0;
  // True when the backend takes CUDA tensors (NCCL), false for CPU tensors (Gloo).
  virtual bool cuda() const = 0;
};

struct CollectiveOptions {
  int rank = 0, world = 1;
  // Gloo's network device: "" resolves this machine's hostname (a pod's IP), an address such as
  // "127.0.0.1" binds there. GLOO_SOCKET_IFNAME, when set, names the interface instead.
  std::string bind_host;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // a collective, and joining
  bool cuda = false;  // NCCL (GPU flavour only) instead of Gloo
};

// Joins the group whose ranks meet through `store` (borrowed, shared: it must outlive nothing
// here, c10d keeps a reference). Blocks until every rank has joined or the store's timeout.
// Returns InvalidArgument for a bad rank/world, Unimplemented for a backend not compiled in,
// Unavailable when the rendezvous fails.
StatusOr<std::unique_ptr<Collective>> c10d_collective(const c10::intrusive_ptr<c10d::Store>& store,
                                                      const CollectiveOptions& options);

// Rank `rank`'s rows of a global batch rows (B, n): rows rank, rank + world, ... -> (B_r, n).
// The shards of ranks 0..world-1 partition the batch; B_r differs by at most one row.
torch::Tensor shard_rows(const torch::Tensor& rows, int rank, int world);

}  // namespace tlt::tst
