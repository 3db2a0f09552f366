#include "runtime/model/safetensors.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/model/gguf_quant.h"
#include "runtime/io/atomic_file.h"

namespace tlt::model {
namespace {

using nlohmann::json;

Status parse_entry(const std::string& path, const std::string& name, const json& e,
                   uint64_t data_size, const uint8_t* data, SafeTensor* t) {
  auto bad = [&](const std::string& why) {
    return Status::Corruption(path + ": tensor " + name + ": " + why);
  };
  if (!e.is_object()) return bad("is not an object");
  auto dtype = e.find("dtype");
  auto shape = e.find("shape");
  auto offsets = e.find("data_offsets");
  if (dtype == e.end() || !dtype->is_string()) return bad("dtype is missing");
  if (shape == e.end() || !shape->is_array()) return bad("shape is missing");
  if (offsets == e.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return bad("data_offsets must be [BEGIN, END]");
  }
  std::string dt = dtype->get<std::string>();
  size_t elem = 0;
  if (dt == "F32") {
    t->dtype = SafetensorsDtype::kF32, elem = 4;
  } else if (dt == "F16") {
    t->dtype = SafetensorsDtype::kF16, elem = 2;
  } else if (dt == "BF16") {
    t->dtype = SafetensorsDtype::kBF16, elem = 2;
  } else {
    return Status::InvalidArgument(path + ": tensor " + name + ": dtype " + dt +
                                   " is not supported (F32, F16, BF16)");
  }
  unsigned __int128 n = 1;
  for (const json& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40)) {
      return bad("shape has a bad dimension");
    }
    t->shape.push_back(int64_t(d.get<uint64_t>()));
    n *= d.get<uint64_t>();
    if (n > (unsigned __int128)(uint64_t(1) << 48)) return bad("has too many elements");
  }
  uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
  if (begin > end) {
    return bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
               "] begin after their end");
  }
  if (end > data_size) {
    return bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
               "] run past the end of the file (" + std::to_string(data_size) +
               " bytes of tensor data)");
  }
  if (uint64_t(n) * elem != end - begin) {
    return bad("data_offsets span " + std::to_string(end - begin) + " bytes but " + dt +
               " of this shape needs " + std::to_string(uint64_t(n) * elem));
  }
  t->name = name;
  t->data = data + begin;
  t->n_bytes = end - begin;
  return Status::Ok();
}

}  // namespace

const SafeTensor* SafetensorsFile::find(const std::string& name) const {
  for (const SafeTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

StatusOr<SafetensorsFile> parse_safetensors(const uint8_t* data, size_t size,
                                            const std::string& name) {
  SafetensorsFile f;
  f.path = name;
  uint64_t n = 0;
  if (size < 8) return Status::Corruption(name + ": truncated safetensors: no header length");
  std::memcpy(&n, data, 8);
  if (n > size - 8) {
    return Status::Corruption(name + ": truncated safetensors: header of " + std::to_string(n) +
                              " bytes runs past the end of the file (" + std::to_string(size) +
                              " bytes)");
  }
  json header = json::parse(data + 8, data + 8 + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return Status::Corruption(name + ": safetensors header is not JSON");
  if (!header.is_object()) {
    return Status::Corruption(name + ": safetensors header is a JSON " + header.type_name() +
                              ", not an object of tensors");
  }
  const uint8_t* tensor_data = data + 8 + n;
  uint64_t data_size = size - 8 - n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    SafeTensor t;
    TLT_RETURN_IF_ERROR(parse_entry(name, it.key(), it.value(), data_size, tensor_data, &t));
    f.tensors.push_back(std::move(t));
  }
  return f;
}

StatusOr<SafetensorsFile> open_safetensors(const std::string& path) {
  StatusOr<MappedFile> m = MappedFile::open(path);
  if (!m.ok()) return m.status();
  auto file = std::make_shared<const MappedFile>(std::move(*m));
  StatusOr<SafetensorsFile> f = parse_safetensors(file->data(), file->size(), path);
  if (!f.ok()) return f.status();
  f->file = std::move(file);
  return f;
}

void safetensor_to_float(const SafeTensor& t, float* dst) {
  uint64_t n = t.dtype == SafetensorsDtype::kF32 ? t.n_bytes / 4 : t.n_bytes / 2;
  if (t.dtype == SafetensorsDtype::kF32) {
    std::memcpy(dst, t.data, t.n_bytes);
    return;
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h = uint16_t(t.data[2 * i] | (t.data[2 * i + 1] << 8));
    dst[i] = t.dtype == SafetensorsDtype::kF16 ? half_to_float(h) : bf16_to_float(h);
  }
}

Status write_safetensors(const std::string& path, const std::vector<Float32Tensor>& tensors) {
  json header = {{"__metadata__", {{"format", "pt"}}}};
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const Float32Tensor& t : tensors) {
    if (!names.insert(t.name).second)
      return Status::InvalidArgument(path + ": tensor " + t.name + " is given twice");
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= uint64_t(d);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 4 * n}}};
    offset += 4 * n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return io::atomic_write(path, [&](std::ostream& f) {
    uint64_t len = text.size();
    f.write(reinterpret_cast<const char*>(&len), 8);
    f.write(text.data(), std::streamsize(text.size()));
    for (const Float32Tensor& t : tensors) {
      uint64_t n = 1;
      for (int64_t d : t.shape) n *= uint64_t(d);
      f.write(reinterpret_cast<const char*>(t.data), std::streamsize(4 * n));
    }
    return Status::Ok();
  });
}

}  // namespace tlt::model
