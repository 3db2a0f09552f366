#include "runtime/model/gguf.h"

#include <cstring>
#include <limits>

namespace tlt::model {
namespace {

constexpr uint64_t kMaxDims = 4;
constexpr uint64_t kMaxStringBytes = uint64_t(1) << 30;

const char* value_type_name(GgufType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? names[uint32_t(t)] : "unknown";
}

// Bounds-checked little-endian reads from the file's bytes. Every failure names the field.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  Status truncated(const std::string& field) const {
    return Status::Corruption(name_ + ": truncated GGUF: " + field + " at byte " +
                              std::to_string(pos_) + " runs past the end of the file (" +
                              std::to_string(size_) + " bytes)");
  }
  Status bad(const std::string& field, const std::string& why) const {
    return Status::Corruption(name_ + ": " + field + ": " + why);
  }

  template <class T>
  Status read(T* v, const std::string& field) {
    if (remaining() < sizeof(T)) return truncated(field);
    std::memcpy(v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status read_string(std::string* s, const std::string& field) {
    uint64_t n = 0;
    TLT_RETURN_IF_ERROR(read(&n, field + " (length)"));
    if (n > remaining()) return truncated(field);
    if (n > kMaxStringBytes) return bad(field, "string of " + std::to_string(n) + " bytes");
    s->assign(reinterpret_cast<const char*>(data_ + pos_), size_t(n));
    pos_ += size_t(n);
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;  // string, array: variable
  }
}

void set_int(GgufValue* v, int64_t x) {
  v->i = x, v->f = double(x), v->b = x != 0;
  v->u = x >= 0 ? uint64_t(x) : 0;
}

template <class T>
Status read_int(Reader& r, GgufValue* v, const std::string& field) {
  T x = 0;
  TLT_RETURN_IF_ERROR(r.read(&x, field));
  set_int(v, int64_t(x));
  return Status::Ok();
}

// A numeric or bool scalar of type t into v (i, u, f, b).
Status read_number(Reader& r, GgufType t, GgufValue* v, const std::string& field) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kBool:
      return read_int<uint8_t>(r, v, field);
    case GgufType::kI8:
      return read_int<int8_t>(r, v, field);
    case GgufType::kU16:
      return read_int<uint16_t>(r, v, field);
    case GgufType::kI16:
      return read_int<int16_t>(r, v, field);
    case GgufType::kU32:
      return read_int<uint32_t>(r, v, field);
    case GgufType::kI32:
      return read_int<int32_t>(r, v, field);
    case GgufType::kI64:
      return read_int<int64_t>(r, v, field);
    case GgufType::kU64: {
      uint64_t x = 0;
      TLT_RETURN_IF_ERROR(r.read(&x, field));
      v->u = x, v->f = double(x), v->b = x != 0;
      v->i = x > uint64_t(std::numeric_limits<int64_t>::max()) ? 0 : int64_t(x);
      return Status::Ok();
    }
    case GgufType::kF32: {
      float x = 0;
      TLT_RETURN_IF_ERROR(r.read(&x, field));
      v->f = x;
      return Status::Ok();
    }
    case GgufType::kF64: {
      double x = 0;
      TLT_RETURN_IF_ERROR(r.read(&x, field));
      v->f = x;
      return Status::Ok();
    }
    default:
      return r.bad(field, "not a number type");
  }
}

Status read_value(Reader& r, GgufType t, GgufValue* v, const std::string& field, int depth);

Status read_array(Reader& r, GgufValue* v, const std::string& field, int depth) {
  uint32_t et = 0;
  uint64_t n = 0;
  TLT_RETURN_IF_ERROR(r.read(&et, field + " (array element type)"));
  TLT_RETURN_IF_ERROR(r.read(&n, field + " (array length)"));
  if (et > uint32_t(GgufType::kF64)) {
    return r.bad(field, "unknown array element type " + std::to_string(et));
  }
  GgufType e = GgufType(et);
  v->element_type = e;
  v->n_elements = n;
  // Each element takes at least one byte (a string at least 8): no count the file cannot hold.
  size_t least = e == GgufType::kString ? 8 : e == GgufType::kArray ? 12 : scalar_size(e);
  if (n > r.remaining() / least)
    return r.truncated(field + " (array of " + std::to_string(n) + ")");
  if (e == GgufType::kString) {
    v->strings.resize(size_t(n));
    for (uint64_t k = 0; k < n; ++k) {
      TLT_RETURN_IF_ERROR(r.read_string(&v->strings[k], field + "[" + std::to_string(k) + "]"));
    }
    return Status::Ok();
  }
  if (e == GgufType::kArray) {  // nested: parsed and dropped
    if (depth > 4) return r.bad(field, "arrays nested deeper than 4");
    for (uint64_t k = 0; k < n; ++k) {
      GgufValue inner;
      TLT_RETURN_IF_ERROR(
          read_value(r, e, &inner, field + "[" + std::to_string(k) + "]", depth + 1));
    }
    return Status::Ok();
  }
  v->numbers.resize(size_t(n));
  for (uint64_t k = 0; k < n; ++k) {
    GgufValue x;
    TLT_RETURN_IF_ERROR(read_number(r, e, &x, field));
    v->numbers[k] = e == GgufType::kU64 ? double(x.u) : x.f;
  }
  return Status::Ok();
}

Status read_value(Reader& r, GgufType t, GgufValue* v, const std::string& field, int depth) {
  v->type = t;
  if (t == GgufType::kString) return r.read_string(&v->s, field);
  if (t == GgufType::kArray) return read_array(r, v, field, depth);
  return read_number(r, t, v, field);
}

Status read_header(Reader& r, GgufFile* f, uint64_t* n_tensors, uint64_t* n_kv) {
  char magic[4];
  TLT_RETURN_IF_ERROR(r.read(&magic, "magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0) return r.bad("magic", "not a GGUF file (no \"GGUF\")");
  TLT_RETURN_IF_ERROR(r.read(&f->version, "version"));
  if (f->version != 2 && f->version != 3) {
    return Status::InvalidArgument(f->path + ": version: GGUF version " +
                                   std::to_string(f->version) + " is not supported (2 or 3)");
  }
  TLT_RETURN_IF_ERROR(r.read(n_tensors, "tensor_count"));
  TLT_RETURN_IF_ERROR(r.read(n_kv, "metadata_kv_count"));
  return Status::Ok();
}

Status read_metadata(Reader& r, GgufFile* f, uint64_t n_kv) {
  if (n_kv > r.remaining() / 12) return r.truncated("metadata (" + std::to_string(n_kv) + " keys)");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    TLT_RETURN_IF_ERROR(r.read_string(&key, "metadata key " + std::to_string(k)));
    uint32_t type = 0;
    TLT_RETURN_IF_ERROR(r.read(&type, key + " (type)"));
    if (type > uint32_t(GgufType::kF64)) {
      return Status::InvalidArgument(f->path + ": " + key + ": unknown value type " +
                                     std::to_string(type));
    }
    GgufValue v;
    TLT_RETURN_IF_ERROR(read_value(r, GgufType(type), &v, key, 0));
    f->metadata[key] = std::move(v);
  }
  if (const GgufValue* a = f->find("general.alignment")) {
    if (a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > 4096) {
      return r.bad("general.alignment",
                   "must be a power of two <= 4096 (got " + std::to_string(a->u) + ")");
    }
    f->alignment = a->u;
  }
  return Status::Ok();
}

Status read_tensor_info(Reader& r, const GgufFile& f, GgufTensor* t, uint64_t index) {
  std::string field = "tensor " + std::to_string(index);
  TLT_RETURN_IF_ERROR(r.read_string(&t->name, field + " name"));
  field = "tensor " + t->name;
  uint32_t n_dims = 0, type = 0;
  TLT_RETURN_IF_ERROR(r.read(&n_dims, field + " n_dims"));
  if (n_dims == 0 || n_dims > kMaxDims) {
    return r.bad(field, "n_dims is " + std::to_string(n_dims) + " (1 to 4)");
  }
  t->ne.resize(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne = 0;
    TLT_RETURN_IF_ERROR(r.read(&ne, field + " ne[" + std::to_string(d) + "]"));
    if (ne == 0 || ne > (uint64_t(1) << 40)) {
      return r.bad(field, "dimension " + std::to_string(d) + " is " + std::to_string(ne));
    }
    t->ne[d] = int64_t(ne);
  }
  TLT_RETURN_IF_ERROR(r.read(&type, field + " type"));
  TLT_RETURN_IF_ERROR(r.read(&t->offset, field + " offset"));
  const GgmlTypeInfo* info = ggml_type_info(type);
  if (info == nullptr) {
    return Status::InvalidArgument(f.path + ": " + field + ": ggml type " + std::to_string(type) +
                                   " is not supported (supported: " + supported_ggml_types() + ")");
  }
  t->type = GgmlType(type);
  if (t->ne[0] % info->block_size != 0) {
    return r.bad(field, "ne[0] = " + std::to_string(t->ne[0]) + " is not a multiple of the " +
                            info->name + " block size " + std::to_string(info->block_size));
  }
  // Each dimension is < 2^40 and there are at most 4, so check the product as it grows.
  unsigned __int128 n = 1;
  for (int64_t ne : t->ne) n *= uint64_t(ne);
  if (n > (unsigned __int128)(uint64_t(1) << 48)) return r.bad(field, "has too many elements");
  t->n_bytes = uint64_t(n) / uint64_t(info->block_size) * uint64_t(info->type_size);
  if (t->offset % f.alignment != 0) {
    return r.bad(field, "offset " + std::to_string(t->offset) + " is not aligned to " +
                            std::to_string(f.alignment));
  }
  return Status::Ok();
}

}  // namespace

int64_t GgufTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t x : ne) n *= x;
  return n;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  for (const GgufTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {
Status missing_key(const GgufFile& f, const std::string& key) {
  return Status::NotFound(f.path + ": metadata key " + key + " is missing");
}
Status wrong_type(const GgufFile& f, const std::string& key, const GgufValue& v, const char* want) {
  return Status::InvalidArgument(f.path + ": metadata key " + key + " is a " +
                                 value_type_name(v.type) + ", expected " + want);
}
bool is_int(GgufType t) {
  return t != GgufType::kF32 && t != GgufType::kF64 && t != GgufType::kString &&
         t != GgufType::kArray && t != GgufType::kBool;
}
}  // namespace

StatusOr<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(*this, key);
  if (v->type != GgufType::kString) return wrong_type(*this, key, *v, "string");
  return v->s;
}

StatusOr<uint64_t> GgufFile::get_uint(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(*this, key);
  if (!is_int(v->type) || (v->type != GgufType::kU64 && v->i < 0)) {
    return wrong_type(*this, key, *v, "non-negative integer");
  }
  return v->u;
}

StatusOr<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(*this, key);
  if (v->type == GgufType::kString || v->type == GgufType::kArray) {
    return wrong_type(*this, key, *v, "number");
  }
  return v->f;
}

StatusOr<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(*this, key);
  if (v->type != GgufType::kBool) return wrong_type(*this, key, *v, "bool");
  return v->b;
}

StatusOr<GgufFile> parse_gguf(const uint8_t* data, size_t size, const std::string& name) {
  GgufFile f;
  f.path = name;
  Reader r(data, size, f.path);
  uint64_t n_tensors = 0, n_kv = 0;
  TLT_RETURN_IF_ERROR(read_header(r, &f, &n_tensors, &n_kv));
  TLT_RETURN_IF_ERROR(read_metadata(r, &f, n_kv));
  if (n_tensors > r.remaining() / 24) {
    return r.truncated("tensor table (" + std::to_string(n_tensors) + " tensors)");
  }
  f.tensors.resize(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TLT_RETURN_IF_ERROR(read_tensor_info(r, f, &f.tensors[k], k));
  }
  uint64_t data_start = (uint64_t(r.pos()) + f.alignment - 1) / f.alignment * f.alignment;
  uint64_t data_size = data_start <= size ? size - data_start : 0;
  for (GgufTensor& t : f.tensors) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return Status::Corruption(f.path + ": truncated GGUF: tensor " + t.name + " (" +
                                std::to_string(t.n_bytes) + " bytes at data offset " +
                                std::to_string(t.offset) + ") runs past the end of the file (" +
                                std::to_string(data_size) + " bytes of tensor data)");
    }
    t.data = data + data_start + t.offset;
  }
  return f;
}

StatusOr<GgufFile> open_gguf(const std::string& path) {
  StatusOr<MappedFile> m = MappedFile::open(path);
  if (!m.ok()) return m.status();
  auto file = std::make_shared<const MappedFile>(std::move(*m));
  StatusOr<GgufFile> f = parse_gguf(file->data(), file->size(), path);
  if (!f.ok()) return f.status();
  f->file = std::move(file);
  return f;
}

}  // namespace tlt::model
