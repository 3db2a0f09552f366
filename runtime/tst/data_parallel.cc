// c10d behind runtime/tst/data_parallel.h and runtime/tst/group.h.
#include "runtime/tst/data_parallel.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdlib>
#include <thread>

#include "runtime/tst/group.h"

// Gloo needs its own headers (Debian: libgloo-dev) besides LibTorch's; without them the CPU
// build still compiles and data parallelism answers Unimplemented.
#if defined(USE_C10D_GLOO) && __has_include(<gloo/rendezvous/store.h>)
#define TLT_HAVE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
// NCCL only in the GPU flavour (cmake -DTLT_GPU=ON with a CUDA LibTorch). Never compiled on the
// CPU machines.
#if defined(TLT_GPU) && defined(USE_C10D_NCCL)
#define TLT_HAVE_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace tlt::tst {
namespace {

std::string what(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

// PG: ProcessGroupGloo or ProcessGroupNCCL, used through their own type (a ProcessGroup in
// LibTorch 1.13, a Backend from 2.0 on: both have these calls).
template <class PG>
class C10dCollective final : public Collective {
 public:
  C10dCollective(c10::intrusive_ptr<PG> pg, bool cuda) : pg_(std::move(pg)), cuda_(cuda) {}
  int rank() const override { return pg_->getRank(); }
  int world() const override { return pg_->getSize(); }
  bool cuda() const override { return cuda_; }

  Status all_reduce_sum(torch::Tensor& t) override {
    return run("allreduce", [&] {
      std::vector<at::Tensor> v{t};
      pg_->allreduce(v)->wait();
    });
  }
  Status broadcast(torch::Tensor& t, int root) override {
    return run("broadcast", [&] {
      std::vector<at::Tensor> v{t};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      pg_->broadcast(v, o)->wait();
    });
  }

 private:
  template <class F>
  Status run(const char* op, F&& f) {
    if (!broken_.empty()) return Status::Unavailable(broken_);
    try {
      f();
      return Status::Ok();
    } catch (const std::exception& e) {
      broken_ = std::string(op) + " of data-parallel rank " + std::to_string(rank()) + " of " +
                std::to_string(world()) +
                " failed (a worker died, or stalled past the timeout): " + what(e);
      return Status::Unavailable(broken_);
    }
  }

  c10::intrusive_ptr<PG> pg_;
  bool cuda_;
  std::string broken_;  // set by the first failure: the group is unusable after it
};

#ifdef TLT_HAVE_GLOO
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& bind_host) {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname && *ifname) return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (!bind_host.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(bind_host);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

// The backend's collective, or null when it is not compiled in. Throws when joining fails.
std::unique_ptr<Collective> make_collective(const c10::intrusive_ptr<c10d::Store>& store,
                                            const CollectiveOptions& o) {
  if (o.cuda) {
#ifdef TLT_HAVE_NCCL
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = o.timeout;  // enforced with NCCL_ASYNC_ERROR_HANDLING or NCCL_BLOCKING_WAIT
    return std::make_unique<C10dCollective<c10d::ProcessGroupNCCL>>(
        c10::make_intrusive<c10d::ProcessGroupNCCL>(store, o.rank, o.world, opts), true);
#else
    return nullptr;
#endif
  }
#ifdef TLT_HAVE_GLOO
  auto opts = c10d::ProcessGroupGloo::Options::create(o.timeout);
  opts->devices.push_back(gloo_device(o.bind_host));
  return std::make_unique<C10dCollective<c10d::ProcessGroupGloo>>(
      c10::make_intrusive<c10d::ProcessGroupGloo>(store, o.rank, o.world, opts), false);
#else
  (void)store;
  return nullptr;
#endif
}

}  // namespace

StatusOr<std::unique_ptr<Collective>> c10d_collective(const c10::intrusive_ptr<c10d::Store>& store,
                                                      const CollectiveOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world) {
    return Status::InvalidArgument("data-parallel rank " + std::to_string(o.rank) +
                                   " is not in [0, " + std::to_string(o.world) + ")");
  }
  std::unique_ptr<Collective> c;
  try {
    c = make_collective(store, o);
  } catch (const std::exception& e) {
    return Status::Unavailable("data-parallel rank " + std::to_string(o.rank) + " of " +
                               std::to_string(o.world) + " could not join the group: " + what(e));
  }
  if (!c) {
    return Status::Unimplemented(
        o.cuda ? "NCCL data parallelism is only in the GPU flavour (cmake -DTLT_GPU=ON with a "
                 "CUDA LibTorch)"
               : "this tlt was built without Gloo (install libgloo-dev and rebuild) and cannot "
                 "run data-parallel workers; set spec.workers.replicas: 1");
  }
  return c;
}

torch::Tensor shard_rows(const torch::Tensor& rows, int rank, int world) {
  torch::Tensor index = torch::arange(
      rank, rows.size(0), world, torch::TensorOptions().dtype(torch::kInt64).device(rows.device()));
  return rows.index_select(0, index);  // (B_r, n)
}

// ---- DataParallelGroup ----------------------------------------------------------------------

struct DataParallelGroup::Impl {
  GroupOptions options;                    // constant after open
  c10::intrusive_ptr<c10d::Store> store;   // the ranks meet here (under the prefix, if any)
  int port = 0;                            // the TCPStore's; 0 for a file
  std::unique_ptr<Collective> collective;  // after join
};

namespace {

c10::intrusive_ptr<c10d::Store> with_prefix(c10::intrusive_ptr<c10d::Store> store,
                                            const std::string& prefix) {
  if (prefix.empty()) return store;
  return c10::make_intrusive<c10d::PrefixStore>(prefix, std::move(store));
}

}  // namespace

DataParallelGroup::DataParallelGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DataParallelGroup::~DataParallelGroup() = default;
int DataParallelGroup::rank() const {
  return impl_->options.rank;
}
int DataParallelGroup::world() const {
  return impl_->options.world;
}
int DataParallelGroup::port() const {
  return impl_->port;
}
Collective* DataParallelGroup::collective() const {
  return impl_->collective.get();
}

StatusOr<std::unique_ptr<DataParallelGroup>> DataParallelGroup::open(const GroupOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world || o.port < 0 || o.port > 65535) {
    return Status::InvalidArgument("data-parallel rank " + std::to_string(o.rank) + " of " +
                                   std::to_string(o.world) + " at port " + std::to_string(o.port) +
                                   " is not valid");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  if (!o.store_file.empty()) {
    try {
      impl->store =
          with_prefix(c10::make_intrusive<c10d::FileStore>(o.store_file, o.world), o.store_prefix);
    } catch (const std::exception& e) {
      return Status::Unavailable("data-parallel rank " + std::to_string(o.rank) +
                                 " cannot open the rendezvous file " + o.store_file + ": " +
                                 what(e));
    }
    return std::unique_ptr<DataParallelGroup>(new DataParallelGroup(std::move(impl)));
  }
  c10d::TCPStoreOptions so;
  so.port = uint16_t(o.port);
  so.isServer = o.rank == 0;
  so.waitWorkers = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.rendezvous_timeout_s);
  std::string last;
  do {  // a rank > 0 may start before rank 0 listens, or before its name resolves
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    so.timeout = std::max(std::chrono::milliseconds(1000), left);
    try {
      auto tcp = c10::make_intrusive<c10d::TCPStore>(o.rank == 0 ? "127.0.0.1" : o.host, so);
      impl->port = int(tcp->getPort());
      impl->store = with_prefix(std::move(tcp), o.store_prefix);
      return std::unique_ptr<DataParallelGroup>(new DataParallelGroup(std::move(impl)));
    } catch (const std::exception& e) {
      last = what(e);
      if (o.rank == 0) {
        return Status::Unavailable("data-parallel rank 0 cannot host the rendezvous on port " +
                                   std::to_string(o.port) + ": " + last);
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  } while (std::chrono::steady_clock::now() < deadline);
  return Status::DeadlineExceeded("data-parallel rank " + std::to_string(o.rank) +
                                  " found no rank 0 at " + o.host + ":" + std::to_string(o.port) +
                                  " in " + std::to_string(o.rendezvous_timeout_s) + " s: " + last);
}

Status DataParallelGroup::set(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable("data-parallel rank " + std::to_string(rank()) + " cannot write " +
                               key + " to the rendezvous store: " + what(e));
  }
}

StatusOr<std::string> DataParallelGroup::get(const std::string& key, int timeout_s) {
  auto start = std::chrono::steady_clock::now();
  try {
    impl_->store->wait({key}, std::chrono::seconds(timeout_s));
    std::vector<uint8_t> v = impl_->store->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    // A timeout throws once its time is up; a store that is gone throws at once.
    bool waited = std::chrono::steady_clock::now() - start >= std::chrono::seconds(timeout_s);
    std::string why = "data-parallel rank " + std::to_string(rank()) + " waiting for " + key +
                      " in the rendezvous store: " + what(e);
    return waited ? Status::DeadlineExceeded(why) : Status::Unavailable(why);
  }
}

Status DataParallelGroup::join() {
  const GroupOptions& o = impl_->options;
  impl_->store->setTimeout(std::chrono::seconds(o.rendezvous_timeout_s));
  CollectiveOptions co;
  co.rank = o.rank, co.world = o.world;
  co.bind_host = o.loopback ? "127.0.0.1" : "";
  co.timeout = std::chrono::seconds(o.timeout_s);
  co.cuda = o.cuda;
  StatusOr<std::unique_ptr<Collective>> c = c10d_collective(impl_->store, co);
  if (!c.ok()) return c.status();
  impl_->collective = std::move(*c);
  return Status::Ok();
}

}  // namespace tlt::tst
