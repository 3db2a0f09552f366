// The RL run's weight-sync group: the driver (rank 0) broadcasts the policy's and the drafter's
// weights to every worker that holds them (local worker processes, or a cluster job's rollout
// and drafter pods; ranks 1..W) over c10d (Gloo on CPU tensors; NCCL in the GPU flavour),
// instead of each worker loading a checkpoint file (or a pod receiving it over its connection).
// Control messages, drafter parts and hidden-state buffers stay on the channel
// (runtime/rl/channel.h); only the weights' bulk bytes travel here.
//
// One publish of a module's tensors (its parameters, then its buffers, in named order: the set
// model::load_checkpoint fills), every rank calling in the same order:
//   1. a header, int64 (6,): {magic, kind, version, bucket count K, bucket bytes, total bytes T};
//   2. the K bucket checksums, int64 (K,): weight_checksum() of each bucket's bytes;
//   3. the publish's proof, uint8 (64,): WeightSyncAuth::mac of a text naming the header's six
//      fields and the K checksums, as hex digits;
//   4. the K buckets: the tensors' bytes laid end to end (T bytes), cut into slices of
//      `bucket bytes` (the last one shorter), each a uint8 (<= bucket bytes,) broadcast.
// A receiver checks the header's shape (magic, K = ceil(T / bucket bytes), bounded sizes) and
// the proof before it allocates or accepts anything: a malformed header or a proof that does
// not match means rank 0 is not the job's driver, so it refuses the publish (Corruption, counted)
// and leaves the group (broken). Otherwise it takes part in every broadcast of the publish (the
// group stays in step), then refuses it (Corruption; the module untouched; refused() counts it)
// when the kind, version or T differ from what it expects, or a bucket's bytes do not match its
// checksum. After copying an accepted publish into its module it checks the bytes it now holds
// against the header's checksums again (Corruption, counted, when they differ).
//
// Where the bytes are: in a Gloo group on the CPU (a GPU module's tensors are copied to host
// memory); in a CUDA (NCCL) group on the current CUDA device, end to end: rank 0 lays its
// tensors' bytes out on the GPU, checksums them there (device_weight_checksum) and broadcasts the
// GPU buckets, and a receiver takes them into a GPU buffer, checks them there and copies them
// into its module's tensors device to device. Only the header, the checksums and the proof (a
// few hundred bytes) pass through host memory.
//
// Who may join: every member proves it holds the job's secret (runtime/cluster/job_secret.h)
// through WeightSyncAuth, derived from the secret by runtime/rl/weight_publisher.h (this file,
// in tlt_core, has no crypto of its own): the group's store keys live under a prefix only a
// secret holder can compute, so a peer without it can neither read the members' addresses nor
// take a rank's place in Gloo's rendezvous (it waits alone, under other keys, until its
// timeout); and each publish carries a keyed MAC that receivers verify, so an impostor rank 0
// cannot feed weights. The checksums are a fast 64-bit hash, not a cryptographic digest: the
// MAC binds a publish's kind, version, sizes and checksums to a secret holder; the bucket bytes
// are bound by the checksums only. Gloo's pair connections and the bytes on them carry no proof
// and no encryption of their own: the job's network policy keeps other peers off them.
//
// Where the group meets: a local group (store_file set) at a c10d FileStore in a directory
// private to the run, and Gloo binds 127.0.0.1: nothing listens beyond loopback. Otherwise
// rank 0 hosts a TCPStore on `port`, on every interface (a cluster trainer pod's "weight-sync"
// port; LibTorch's TCPStore has no bind address).
//
// Membership: a group's world is fixed. A rank that dies breaks it: every later call returns
// Unavailable. The RL driver then opens a new group (a generation: its own store and proof; a
// fresh file locally, the same fixed port on a cluster) that every worker joins at a step
// boundary, and until then the workers load checkpoint files.
// Thread safety: one thread per object.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::rl {

enum class WeightKind : int64_t { kPolicy = 1, kDrafter = 2 };

// A 64-bit hash of `bytes` (a contiguous CPU uint8 tensor): any change of one byte changes it
// (with overwhelming probability). The same on every machine (little-endian words).
uint64_t weight_checksum(const torch::Tensor& bytes);

// A CUDA group's bucket checksum, computed with tensor operations where `bytes` (a uint8 tensor
// of any device) lives, so a GPU bucket never visits host memory: the wrapping sum, over the
// bytes' 64-bit little-endian words (zero-padded), of a bijective mix of each word and its
// position, mixed with the byte count. Any changed or moved word changes it (with overwhelming
// probability); the same on every device and machine. Not weight_checksum's value: every rank of
// a group uses the one its backend calls for.
uint64_t device_weight_checksum(const torch::Tensor& bytes);

// The tensors a publish carries: `module`'s parameters, then its buffers, in named order.
std::vector<torch::Tensor> synced_tensors(torch::nn::Module& module);

// A member's proof of the job secret, for one generation of the group.
struct WeightSyncAuth {
  // Every key of the group's store lives under this prefix (non-empty).
  std::string store_prefix;
  // The keyed MAC of a statement, as 64 lowercase hex digits (required): rank 0 signs each
  // publish with it; a receiver recomputes it and compares.
  std::function<std::string(const std::string& statement)> mac;
};

struct WeightSyncOptions {
  int rank = 0, world = 1;
  WeightSyncAuth auth;  // required: open() refuses a group without a proof
  // Non-empty: a local group meets at this file (its directory private to the run: 0700); host
  // and port are unused and port() is 0.
  std::string store_file;
  // Ranks > 0: rank 0's store address. Rank 0: "127.0.0.1" keeps the group on this machine
  // (Gloo binds loopback); any other (e.g. "0.0.0.0", pods) binds the host's interface.
  std::string host = "127.0.0.1";
  int port = 0;                    // rank 0: 0 picks a free port (see port())
  int rendezvous_timeout_s = 120;  // for every rank to join
  int timeout_s = 300;             // one broadcast: a stuck peer breaks the group after this
  int64_t bucket_bytes = int64_t(32) << 20;
  bool cuda = false;  // NCCL over CUDA tensors (GPU flavour only), else Gloo over CPU tensors
};

class WeightSync {
 public:
  // Rank 0 starts the store and returns at once; a rank > 0 connects to it (retrying until the
  // rendezvous timeout: DeadlineExceeded). InvalidArgument for a bad rank, world or bucket size,
  // or an auth without a prefix or MAC.
  static StatusOr<std::unique_ptr<WeightSync>> open(const WeightSyncOptions& options);
  ~WeightSync();
  WeightSync(const WeightSync&) = delete;
  WeightSync& operator=(const WeightSync&) = delete;

  int rank() const;
  int world() const;
  int port() const;  // the store's port; 0 for a file
  // Blocks until every rank joined (Unavailable or DeadlineExceeded when one does not within
  // the rendezvous timeout: a peer with another proof never counts); Unimplemented when this
  // build has no Gloo.
  Status join();

  // Rank 0: broadcasts `tensors` as `version` of `kind`. corrupt_bucket >= 0 (a test hook) flips
  // one byte of that bucket after its checksum was taken. Unavailable when the group is broken.
  Status publish(WeightKind kind, int64_t version, const std::vector<torch::Tensor>& tensors,
                 int64_t corrupt_bucket = -1);
  // Rank > 0: receives a publish into `tensors` (the module's, in synced_tensors() order), which
  // must be `version` of `kind`. Corruption when it is refused (see the top; a publish without a
  // valid proof also breaks the group), Unavailable when the group is broken.
  Status receive(WeightKind kind, int64_t version, const std::vector<torch::Tensor>& tensors);

  int64_t refused() const;  // publishes refused by this rank so far
  bool broken() const;      // a broadcast failed or a publish had no proof: the group is unusable

 private:
  struct Impl;
  explicit WeightSync(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tlt::rl
