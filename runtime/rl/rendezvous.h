// TCP rendezvous between a cluster RLJob's trainer pod (the driver, listening) and its rollout
// pods (workers, connecting): the socket then carries the driver <-> worker Channel
// (runtime/rl/channel.h) with file mirroring on.
//
// A worker connects and says {"op":"hello","index":I}; the driver pairs the socket with worker
// I. A worker that comes back (its pod restarted) connects again the same way.
//
// Errors: listen_tcp: Unavailable when the port cannot be bound. accept_worker: DeadlineExceeded
// when no worker connects in time, Corruption for a first line that is not a hello. connect_tcp:
// DeadlineExceeded after retrying until the deadline (the trainer pod may start later).
// Ownership: returned descriptors belong to the caller (close them).
// Thread safety: functions; no shared state.
#pragma once

#include <string>
#include <utility>

#include "api/status.h"

namespace tlt::rl {

// A listening socket on all interfaces, or on 127.0.0.1 when `loopback`.
StatusOr<int> listen_tcp(int port, bool loopback = false);

// Waits up to timeout_ms for a connection that says hello; returns (socket, index).
StatusOr<std::pair<int, int>> accept_worker(int listen_fd, int timeout_ms);

// Connects to host:port, retrying every 500 ms for up to timeout_ms, then says hello as
// worker `index`. Returns the socket.
StatusOr<int> connect_worker(const std::string& host, int port, int index, int timeout_ms);

}  // namespace tlt::rl
