#include "runtime/model/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "api/fnv.h"
#include "runtime/io/atomic_file.h"

namespace tlt::model {
namespace {

constexpr char kMagic[8] = {'T', 'L', 'T', 'C', 'K', 'P', 'T', '1'};

template <class T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
bool get(const std::string& in, size_t* pos, T* v) {
  if (in.size() < *pos + sizeof(T)) return false;
  std::memcpy(v, in.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return true;
}

// A checkpoint file read whole: its metadata, and its payload as a range of `data` (no copy).
struct Parsed {
  std::string metadata, data;
  size_t payload_at = 0, payload_size = 0;
  const char* payload() const { return data.data() + payload_at; }
};

StatusOr<Parsed> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::NotFound(path + ": no such checkpoint");
  Parsed p;
  std::streamoff size = in.tellg();
  in.seekg(0);
  p.data.resize(size_t(std::max<std::streamoff>(size, 0)));
  in.read(p.data.data(), static_cast<std::streamsize>(p.data.size()));
  const std::string& data = p.data;
  auto corrupt = [&](const std::string& why) {
    return Status::Corruption(path + ": " + why + "; the file is damaged or not a tlt checkpoint");
  };
  if (!in) return corrupt("cannot be read to its end");
  if (data.size() < sizeof kMagic || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    return corrupt("bad magic");
  }
  size_t pos = sizeof kMagic;
  uint32_t meta_len = 0;
  uint64_t payload_len = 0, checksum = 0;
  if (!get(data, &pos, &meta_len) || data.size() < pos + meta_len)
    return corrupt("truncated header");
  p.metadata = data.substr(pos, meta_len);
  pos += meta_len;
  if (!get(data, &pos, &payload_len) || !get(data, &pos, &checksum))
    return corrupt("truncated header");
  if (data.size() - pos != payload_len) {
    return corrupt("payload is " + std::to_string(data.size() - pos) + " bytes, expected " +
                   std::to_string(payload_len) + " (truncated?)");
  }
  p.payload_at = pos, p.payload_size = payload_len;
  if (fnv1a64(p.payload(), p.payload_size) != checksum) return corrupt("checksum mismatch");
  return p;
}

}  // namespace

Status save_checkpoint(const torch::nn::Module& module, const std::string& path,
                       const std::string& metadata, io::Sync sync) {
  // Two processes saving the same path at once (two jobs training the same cached warm start)
  // each rename a complete file into place; the last one wins (io::atomic_write).
  return io::atomic_write(path, [&](std::ostream& f) -> Status {
    std::string head(kMagic, sizeof kMagic);
    put(&head, static_cast<uint32_t>(metadata.size()));
    head += metadata;
    f.write(head.data(), static_cast<std::streamsize>(head.size()));
    std::string lengths(2 * sizeof(uint64_t), '\0');  // payload size and checksum, once known
    f.write(lengths.data(), static_cast<std::streamsize>(lengths.size()));
    // The payload streams to the file as the archive writes it (no copy of it in memory),
    // hashed on the way.
    uint64_t size = 0, checksum = kFnv1a64Offset;
    try {
      torch::serialize::OutputArchive archive;
      for (const auto& p : module.named_parameters())
        archive.write(p.key(), p.value().detach().cpu());
      for (const auto& b : module.named_buffers()) archive.write(b.key(), b.value().cpu(), true);
      archive.save_to([&](const void* data, size_t n) -> size_t {
        f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
        checksum = fnv1a64(data, n, checksum);
        size += n;
        return f ? n : 0;
      });
    } catch (const c10::Error& e) {
      if (!f) return Status::Unavailable(path + ": write failed (disk full?)");
      return Status::Internal("serialising checkpoint: " + std::string(e.what_without_backtrace()));
    }
    lengths.clear();
    put(&lengths, size);
    put(&lengths, checksum);
    f.seekp(static_cast<std::streamoff>(head.size()));
    f.write(lengths.data(), static_cast<std::streamsize>(lengths.size()));
    return Status::Ok();
  }, sync);
}

StatusOr<std::string> read_checkpoint_metadata(const std::string& path) {
  StatusOr<Parsed> p = read_file(path);
  if (!p.ok()) return p.status();
  return p->metadata;
}

StatusOr<std::string> load_checkpoint(torch::nn::Module& module, const std::string& path) {
  StatusOr<Parsed> p = read_file(path);
  if (!p.ok()) return p.status();
  torch::serialize::InputArchive archive;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (destination, loaded)
  try {
    archive.load_from(p->payload(), p->payload_size);
    auto stage = [&](const std::string& key, torch::Tensor dst, bool buffer) -> Status {
      torch::Tensor loaded;
      if (!archive.try_read(key, loaded, buffer)) {
        return Status::InvalidArgument(path + ": has no tensor \"" + key +
                                       "\"; it was saved from a different model");
      }
      if (loaded.sizes() != dst.sizes() || loaded.scalar_type() != dst.scalar_type()) {
        std::ostringstream why;
        why << path << ": tensor \"" << key << "\" is " << loaded.sizes() << " "
            << loaded.scalar_type() << " but the model expects " << dst.sizes() << " "
            << dst.scalar_type() << "; the checkpoint is from another configuration";
        return Status::InvalidArgument(why.str());
      }
      copies.emplace_back(dst, loaded);
      return Status::Ok();
    };
    for (const auto& q : module.named_parameters())
      TLT_RETURN_IF_ERROR(stage(q.key(), q.value(), false));
    for (const auto& b : module.named_buffers())
      TLT_RETURN_IF_ERROR(stage(b.key(), b.value(), true));
  } catch (const c10::Error& e) {
    return Status::Corruption(path + ": payload does not decode: " + e.what_without_backtrace());
  }
  torch::NoGradGuard no_grad;
  for (auto& [dst, loaded] : copies) dst.copy_(loaded);
  return p->metadata;
}

StatusOr<torch::Tensor> read_checkpoint_tensor(const std::string& path, const std::string& name) {
  StatusOr<Parsed> p = read_file(path);
  if (!p.ok()) return p.status();
  torch::Tensor t;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(p->payload(), p->payload_size);
    if (!archive.try_read(name, t))
      return Status::NotFound(path + ": has no tensor \"" + name + "\"");
  } catch (const c10::Error& e) {
    return Status::Corruption(path + ": payload does not decode: " + e.what_without_backtrace());
  }
  return t;
}

}  // namespace tlt::model
