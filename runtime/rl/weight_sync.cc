// The weight-sync group over runtime/tst/group.h's c10d set-up (a TCPStore or a FileStore under
// the proof's key prefix, then the process group), and each publish's proof.
#include "runtime/rl/weight_sync.h"

#include <algorithm>
#include <cstring>

#include "runtime/tst/data_parallel.h"
#include "runtime/tst/group.h"

namespace tlt::rl {
namespace {

constexpr int64_t kMagic = 0x746c7457534e43;  // "tltWSNC"
constexpr int64_t kHeaderSize = 6;
constexpr int64_t kProofChars = 64;  // an HMAC-SHA256 in hex
// Bounds on a header, checked before anything is allocated from it: far above any model tlt
// trains (4 TiB, 1 GiB buckets), far below what an allocation of K checksums could exhaust.
constexpr int64_t kMaxTotalBytes = int64_t(1) << 42;
constexpr int64_t kMaxBucketBytes = int64_t(1) << 30;

uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w;
  h *= 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

// `tensors`' bytes end to end on `device`: uint8 (T,). A CUDA group's stay on the GPU.
torch::Tensor flat_bytes(const std::vector<torch::Tensor>& tensors, const torch::Device& device) {
  std::vector<torch::Tensor> parts;
  parts.reserve(tensors.size());
  for (const torch::Tensor& t : tensors)
    parts.push_back(t.detach().to(device).contiguous().reshape({-1}).view(torch::kUInt8));
  if (parts.empty()) return torch::empty({0}, torch::TensorOptions(torch::kUInt8).device(device));
  return torch::cat(parts);
}

// x >> s with zeros shifted in, for int64 tensors (whose >> keeps the sign).
torch::Tensor shift_right(const torch::Tensor& x, int64_t s) {
  return torch::bitwise_and(torch::bitwise_right_shift(x, s), (int64_t(1) << (64 - s)) - 1);
}

// A bijection of 64-bit words, elementwise (int64 arithmetic wraps).
torch::Tensor mix_words(torch::Tensor x) {
  x = x * int64_t(0x9E3779B97F4A7C15ull);
  x = torch::bitwise_xor(x, shift_right(x, 32));
  x = x * int64_t(0xD6E8FEB86659FD93ull);
  return torch::bitwise_xor(x, shift_right(x, 29));
}

int64_t total_bytes(const std::vector<torch::Tensor>& tensors) {
  int64_t n = 0;
  for (const torch::Tensor& t : tensors) n += t.numel() * int64_t(t.element_size());
  return n;
}

// Bucket k of a flat buffer: uint8 (<= bucket_bytes,), a view.
torch::Tensor bucket(const torch::Tensor& flat, int64_t k, int64_t bucket_bytes) {
  int64_t begin = k * bucket_bytes;
  return flat.narrow(0, begin, std::min(bucket_bytes, flat.size(0) - begin));
}

int64_t bucket_count(int64_t total, int64_t bucket_bytes) {
  return (total + bucket_bytes - 1) / bucket_bytes;
}

std::string kind_name(WeightKind k) {
  return k == WeightKind::kPolicy ? "policy" : "drafter";
}

// What a publish's MAC covers: the header's fields and every checksum.
std::string publish_statement(const int64_t* header, const torch::Tensor& sums) {
  std::string s = "tlt weight-sync publish";
  for (int64_t i = 0; i < kHeaderSize; ++i) s += " " + std::to_string(header[i]);
  const int64_t* c = sums.data_ptr<int64_t>();
  for (int64_t i = 0; i < sums.numel(); ++i) s += (i == 0 ? " sums " : ",") + std::to_string(c[i]);
  return s;
}

// Equal strings, compared in time that does not depend on where they first differ.
bool same_proof(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// "" when a header's shape is sound (see weight_sync.h), else what is wrong with it.
std::string header_fault(const int64_t* h) {
  const int64_t k = h[3], bb = h[4], total = h[5];
  if (h[0] != kMagic) return "its magic is " + std::to_string(h[0]);
  if (bb < 8 || bb > kMaxBucketBytes) return "its bucket size is " + std::to_string(bb);
  if (total < 0 || total > kMaxTotalBytes) return "its size is " + std::to_string(total);
  if (k != bucket_count(total, bb))
    return std::to_string(k) + " buckets cannot hold " + std::to_string(total) + " bytes";
  return "";
}

}  // namespace

uint64_t device_weight_checksum(const torch::Tensor& bytes) {
  const int64_t n = bytes.numel(), pad = (8 - n % 8) % 8;
  torch::Tensor b = bytes.contiguous();
  if (pad > 0 || b.storage_offset() % 8 != 0)  // whole, aligned 64-bit words
    b = torch::cat({b, torch::zeros({pad}, b.options())});
  torch::Tensor words = b.view(torch::kInt64);                        // (ceil(n / 8),)
  torch::Tensor at = torch::arange(words.numel(), words.options());  // (ceil(n / 8),)
  // Each word mixed with its position: a changed or moved word changes its term, and the
  // wrapping sum of the terms does not depend on the order the device adds them in.
  torch::Tensor terms = mix_words(torch::bitwise_xor(words, at * int64_t(0xA24BAED4963EE407ull)));
  uint64_t sum = uint64_t(terms.sum().item<int64_t>());
  return mix(mix(0xcbf29ce484222325ull, uint64_t(n)), sum);
}

uint64_t weight_checksum(const torch::Tensor& bytes) {
  const auto* p = static_cast<const unsigned char*>(bytes.data_ptr());
  const size_t n = size_t(bytes.numel());
  uint64_t h = mix(0xcbf29ce484222325ull, n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h, w);
  }
  uint64_t tail = 0;
  if (i < n) std::memcpy(&tail, p + i, n - i);
  return mix(h, tail);
}

std::vector<torch::Tensor> synced_tensors(torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (const auto& p : module.named_parameters()) out.push_back(p.value());
  for (const auto& b : module.named_buffers()) out.push_back(b.value());
  return out;
}

struct WeightSync::Impl {
  WeightSyncOptions options;
  std::unique_ptr<tst::DataParallelGroup> group;
  int64_t refused = 0;
  bool broken = false;

  // Where a publish's bytes live: the current CUDA device in a CUDA (NCCL) group, so that GPU
  // weights go device to device without a host copy; the CPU in a Gloo group.
  torch::Device device() const {
    tst::Collective* c = group->collective();
    return c && c->cuda() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  }
  // A bucket's checksum where its bytes are: weight_checksum on the CPU, device_weight_checksum
  // on a GPU (every rank of a group uses the same one: the group is NCCL's or Gloo's).
  int64_t checksum(const torch::Tensor& bytes) const {
    return int64_t(bytes.is_cuda() ? device_weight_checksum(bytes) : weight_checksum(bytes));
  }

  // In place, from rank 0; a CPU tensor in a CUDA collective travels through a device copy.
  Status broadcast(torch::Tensor& t) {
    tst::Collective* c = group->collective();
    if (!c) return Status::FailedPrecondition("the weight-sync group has not joined");
    Status st;
    if (c->cuda() && !t.is_cuda()) {
      torch::Tensor d = t.to(torch::kCUDA);
      st = c->broadcast(d, 0);
      if (st.ok()) t.copy_(d.to(torch::kCPU));
    } else {
      st = c->broadcast(t, 0);
    }
    if (!st.ok()) broken = true;
    return st;
  }

  // A receiver's refusal of a publish that did not come from the job's driver: it leaves the
  // group (the ranks no longer agree on what comes next, or rank 0 is an impostor).
  Status leave(const std::string& what, const std::string& why) {
    broken = true;
    ++refused;
    return Status::Corruption("weight sync refused " + what + ": " + why +
                              "; this rank leaves the group");
  }

  // Receives the publish's header checks, its checksums (K,) and its proof (64,) into `sums`.
  Status receive_signed(const torch::Tensor& header, const std::string& what, torch::Tensor* sums);
  // The buckets of a publish of `total` bytes into `flat` (T,) when it is the module's size,
  // else into a scratch bucket (the group stays in step); "" or the first failing checksum.
  StatusOr<std::string> receive_buckets(const torch::Tensor& sums, int64_t bb, int64_t total,
                                        torch::Tensor* flat);
};

Status WeightSync::Impl::receive_signed(const torch::Tensor& header, const std::string& what,
                                        torch::Tensor* sums) {
  const int64_t* h = header.data_ptr<int64_t>();
  std::string fault = header_fault(h);
  if (!fault.empty()) return leave(what, "its header is malformed: " + fault);
  *sums = torch::empty({h[3]}, torch::kInt64);  // (K,)
  TLT_RETURN_IF_ERROR(broadcast(*sums));
  torch::Tensor proof = torch::zeros({kProofChars}, torch::kUInt8);  // (64,)
  TLT_RETURN_IF_ERROR(broadcast(proof));
  std::string got(static_cast<const char*>(proof.data_ptr()), size_t(kProofChars));
  if (!same_proof(got, options.auth.mac(publish_statement(h, *sums))))
    return leave(what,
                 "it carries no valid proof of the job secret (rank 0 is not this job's "
                 "driver)");
  return Status::Ok();
}

StatusOr<std::string> WeightSync::Impl::receive_buckets(const torch::Tensor& sums, int64_t bb,
                                                        int64_t total, torch::Tensor* flat) {
  const int64_t k = sums.size(0);
  const int64_t* c = sums.data_ptr<int64_t>();
  const bool fits = flat->defined() && flat->size(0) == total;
  torch::Tensor scratch =
      fits ? torch::Tensor()
           : torch::empty({std::min(bb, total)}, torch::TensorOptions(torch::kUInt8).device(device()));
  std::string why;
  for (int64_t b = 0; b < k; ++b) {
    torch::Tensor slice = fits ? bucket(*flat, b, bb)  // (<= bb,)
                               : scratch.narrow(0, 0, std::min(bb, total - b * bb));
    TLT_RETURN_IF_ERROR(broadcast(slice));
    if (why.empty() && checksum(slice) != c[b])
      why = "bucket " + std::to_string(b) + " of " + std::to_string(k) + " fails its checksum";
  }
  return why;
}

WeightSync::WeightSync(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WeightSync::~WeightSync() = default;
int WeightSync::rank() const {
  return impl_->options.rank;
}
int WeightSync::world() const {
  return impl_->options.world;
}
int WeightSync::port() const {
  return impl_->group->port();
}
int64_t WeightSync::refused() const {
  return impl_->refused;
}
bool WeightSync::broken() const {
  return impl_->broken;
}

StatusOr<std::unique_ptr<WeightSync>> WeightSync::open(const WeightSyncOptions& o) {
  if (o.bucket_bytes < 8 || o.bucket_bytes > kMaxBucketBytes)
    return Status::InvalidArgument("weight-sync buckets of " + std::to_string(o.bucket_bytes) +
                                   " bytes: use 8 bytes to 1 GiB");
  if (o.auth.store_prefix.empty() || !o.auth.mac)
    return Status::InvalidArgument(
        "the weight-sync group needs its members' proof of the job secret (a store prefix and a "
        "MAC, runtime/rl/weight_publisher.h)");
  tst::GroupOptions g;
  g.rank = o.rank, g.world = o.world, g.host = o.host, g.port = o.port;
  g.loopback = o.host == "127.0.0.1" || !o.store_file.empty();
  g.store_file = o.store_file, g.store_prefix = o.auth.store_prefix;
  g.rendezvous_timeout_s = o.rendezvous_timeout_s, g.timeout_s = o.timeout_s, g.cuda = o.cuda;
  StatusOr<std::unique_ptr<tst::DataParallelGroup>> group = tst::DataParallelGroup::open(g);
  if (!group.ok()) return group.status().with_context("weight-sync group");
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  impl->group = std::move(*group);
  return std::unique_ptr<WeightSync>(new WeightSync(std::move(impl)));
}

Status WeightSync::join() {
  Status st = impl_->group->join();
  if (!st.ok()) impl_->broken = true;
  return st.with_context("weight-sync group");
}

Status WeightSync::publish(WeightKind kind, int64_t version,
                           const std::vector<torch::Tensor>& tensors, int64_t corrupt_bucket) {
  if (impl_->broken) return Status::Unavailable("the weight-sync group is broken");
  const int64_t bb = impl_->options.bucket_bytes;
  torch::Tensor flat = flat_bytes(tensors, impl_->device());  // (T,)
  if (flat.size(0) > kMaxTotalBytes)
    return Status::InvalidArgument("weight sync: " + std::to_string(flat.size(0)) +
                                   " bytes exceed a publish's limit");
  const int64_t k = bucket_count(flat.size(0), bb);
  torch::Tensor header =
      torch::tensor({kMagic, int64_t(kind), version, k, bb, flat.size(0)}, torch::kInt64);  // (6,)
  torch::Tensor sums = torch::empty({k}, torch::kInt64);                                    // (K,)
  for (int64_t b = 0; b < k; ++b) sums[b] = impl_->checksum(bucket(flat, b, bb));
  const std::string mac =
      impl_->options.auth.mac(publish_statement(header.data_ptr<int64_t>(), sums));
  if (int64_t(mac.size()) != kProofChars)
    return Status::Internal("weight sync: a proof of " + std::to_string(mac.size()) +
                            " characters; expected 64 hex digits");
  torch::Tensor proof = torch::from_blob(const_cast<char*>(mac.data()), {kProofChars},
                                         torch::kUInt8)
                            .clone();  // (64,)
  if (corrupt_bucket >= 0 && corrupt_bucket < k) {
    torch::Tensor first = bucket(flat, corrupt_bucket, bb).narrow(0, 0, 1);  // (1,)
    first.bitwise_xor_(0x5a);
  }
  TLT_RETURN_IF_ERROR(impl_->broadcast(header));
  TLT_RETURN_IF_ERROR(impl_->broadcast(sums));
  TLT_RETURN_IF_ERROR(impl_->broadcast(proof));
  for (int64_t b = 0; b < k; ++b) {
    torch::Tensor slice = bucket(flat, b, bb);
    TLT_RETURN_IF_ERROR(impl_->broadcast(slice));
  }
  return Status::Ok();
}

Status WeightSync::receive(WeightKind kind, int64_t version,
                           const std::vector<torch::Tensor>& tensors) {
  if (impl_->broken) return Status::Unavailable("the weight-sync group is broken");
  const std::string what = kind_name(kind) + " v" + std::to_string(version);
  torch::Tensor header = torch::zeros({kHeaderSize}, torch::kInt64);  // (6,)
  TLT_RETURN_IF_ERROR(impl_->broadcast(header));
  torch::Tensor sums;  // (K,)
  TLT_RETURN_IF_ERROR(impl_->receive_signed(header, what, &sums));
  const int64_t* h = header.data_ptr<int64_t>();
  const int64_t k = h[3], bb = h[4], total = h[5];
  const int64_t expected = total_bytes(tensors);
  torch::Tensor flat =
      total == expected
          ? torch::empty({total}, torch::TensorOptions(torch::kUInt8).device(impl_->device()))
          : torch::Tensor();  // (T,)
  StatusOr<std::string> why = impl_->receive_buckets(sums, bb, total, &flat);
  if (!why.ok()) return why.status();
  if (why->empty() && (h[1] != int64_t(kind) || h[2] != version))
    *why = "it carries " + kind_name(WeightKind(h[1])) + " v" + std::to_string(h[2]);
  if (why->empty() && total != expected)
    *why = "it has " + std::to_string(total) + " bytes, the model " + std::to_string(expected);
  if (!why->empty()) {
    ++impl_->refused;
    return Status::Corruption("weight sync refused " + what + ": " + *why);
  }
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (const torch::Tensor& t : tensors) {
    int64_t n = t.numel() * int64_t(t.element_size());
    t.view({-1}).view(torch::kUInt8).copy_(flat.narrow(0, at, n));  // t is contiguous; any device
    at += n;
  }
  flat = torch::Tensor();  // one copy of the weights at a time
  // The guard: what the module holds now is what was published.
  torch::Tensor held = flat_bytes(tensors, impl_->device());  // (T,)
  const int64_t* c = sums.data_ptr<int64_t>();
  for (int64_t b = 0; b < k; ++b) {
    if (impl_->checksum(bucket(held, b, bb)) != c[b]) {
      ++impl_->refused;
      return Status::Corruption("weight sync: the " + what + " held after the update differs " +
                                "from the published bucket " + std::to_string(b));
    }
  }
  return Status::Ok();
}

}  // namespace tlt::rl
