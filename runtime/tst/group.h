// The data-parallel group of a TST run, as the command line sees it (no LibTorch here): the ranks
// meet at a c10d store (rank 0's TCPStore, or a file store), then all join a process group (Gloo
// on CPU).
//
//   local `tlt run` (workers.replicas = R): the parent is rank 0; it opens the group at a file
//     store in a 0700 directory of the job's (store_file), starts R - 1 worker processes naming
//     that file, then joins; Gloo binds 127.0.0.1, so nothing of the group listens beyond it.
//   cluster pods (`tlt run-role`): rank 0 listens on TLT_RENDEZVOUS_PORT on every interface;
//     rank r connects to <job>-worker-0.<service> on that port, retrying until the pod is up.
//
// Thread safety: one thread uses a group.
#pragma once

#include <memory>
#include <string>

#include "api/status.h"

namespace tlt::tst {

class Collective;  // runtime/tst/data_parallel.h

struct GroupOptions {
  int rank = 0, world = 1;
  std::string host = "127.0.0.1";  // rank 0's address (ranks > 0 connect to it)
  int port = 0;                    // rank 0: 0 picks a free port (see port())
  bool loopback = true;            // every rank on this machine: Gloo binds 127.0.0.1
  int rendezvous_timeout_s = 120;  // for every rank to arrive (pods start at different times)
  int timeout_s = 300;             // for one collective: a stuck peer fails the run after this
  bool cuda = false;               // NCCL over CUDA tensors (GPU flavour only), else Gloo
  // Non-empty: every rank meets at this file (c10d FileStore; every rank on one machine, the
  // file's directory private to the job) instead of rank 0's TCPStore: then nothing of the
  // group listens beyond Gloo's own sockets (on 127.0.0.1 with `loopback`). `host` and `port`
  // are unused.
  std::string store_file;
  // Non-empty: every key the group writes or reads lives under this prefix (c10d PrefixStore
  // over the store), so a peer that cannot name the prefix cannot read the ranks' addresses
  // nor write a rank's keys in the rendezvous.
  std::string store_prefix;
};

class DataParallelGroup {
 public:
  // Rank 0 starts the store on options.port and returns at once; a rank > 0 connects to it,
  // retrying until the rendezvous timeout (then DeadlineExceeded). InvalidArgument for a bad
  // rank or world; Unavailable when rank 0 cannot listen on the port.
  static StatusOr<std::unique_ptr<DataParallelGroup>> open(const GroupOptions& options);
  ~DataParallelGroup();
  DataParallelGroup(const DataParallelGroup&) = delete;
  DataParallelGroup& operator=(const DataParallelGroup&) = delete;

  int rank() const;
  int world() const;
  int port() const;  // the store's port (rank 0's choice when it asked for 0); 0 with a file

  // Blocks until every rank has joined, then builds the process group. Unavailable or
  // DeadlineExceeded when a rank does not arrive in the rendezvous timeout;
  // Unimplemented when this build has no Gloo.
  Status join();
  // The collectives, after join() returned Ok (else null). Borrowed: owned by this group.
  Collective* collective() const;

  // The rendezvous store's key-value pairs (under the prefix, if any): what the ranks tell each
  // other outside the collectives, before join() too. set() overwrites; Unavailable when the
  // store is gone (rank 0's process ended). get() blocks until `key` is set or timeout_s passed:
  // DeadlineExceeded then, Unavailable when the store fails sooner than that.
  Status set(const std::string& key, const std::string& value);
  StatusOr<std::string> get(const std::string& key, int timeout_s);

 private:
  struct Impl;
  explicit DataParallelGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tlt::tst
