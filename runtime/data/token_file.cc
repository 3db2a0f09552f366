#include "runtime/data/token_file.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "api/fnv.h"
#include "runtime/io/atomic_file.h"

namespace tlt::data {
namespace {

constexpr char kMagic[] = "TLTTOK1\n";
constexpr size_t kMagicLen = 8;

void put32(std::string* s, int32_t v) {
  s->append(reinterpret_cast<const char*>(&v), 4);
}

bool get32(const std::string& s, size_t* pos, int32_t* v) {
  if (s.size() < *pos + 4) return false;
  std::memcpy(v, s.data() + *pos, 4);
  *pos += 4;
  return true;
}

}  // namespace

std::string cache_root() {
  if (const char* d = std::getenv("TLT_CACHE"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/tlt";
}

bool held_out_by_name(const std::string& name, double fraction) {
  return double(fnv1a64(name) % 1000000) < fraction * 1000000.0;
}

Status write_token_file(const std::string& path, const TokenizedCorpus& corpus) {
  std::string out(kMagic, kMagicLen);
  put32(&out, corpus.vocab);
  put32(&out, corpus.eos_id);
  put32(&out, int32_t(corpus.docs.size()));
  for (const TokenizedDocument& d : corpus.docs) {
    put32(&out, int32_t(d.name.size()));
    out += d.name;
    put32(&out, int32_t(d.ids.size()));
    out.append(reinterpret_cast<const char*>(d.ids.data()), d.ids.size() * 4);
  }
  uint64_t sum = fnv1a64(out);
  out.append(reinterpret_cast<const char*>(&sum), 8);
  // Two processes caching the same corpus at once (tests run in parallel) each rename a whole
  // file into place, never one half-written by the other. A cache: rebuilt if lost, no sync.
  return io::atomic_write(path, out, io::Sync::kNone);
}

StatusOr<TokenizedCorpus> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": no tokenized corpus");
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string s = buf.str();
  auto bad = [&](const std::string& why) {
    return Status::Corruption(path + ": " + why + "; delete it and it is rebuilt");
  };
  if (s.size() < kMagicLen + 8 || s.compare(0, kMagicLen, kMagic) != 0)
    return bad("not a token file");
  uint64_t sum = 0;
  std::memcpy(&sum, s.data() + s.size() - 8, 8);
  std::string body = s.substr(0, s.size() - 8);
  if (fnv1a64(body) != sum) return bad("checksum mismatch (truncated or damaged)");
  TokenizedCorpus c;
  size_t pos = kMagicLen;
  int32_t n = 0;
  if (!get32(body, &pos, &c.vocab) || !get32(body, &pos, &c.eos_id) || !get32(body, &pos, &n) ||
      n < 0) {
    return bad("bad header");
  }
  for (int32_t i = 0; i < n; ++i) {
    TokenizedDocument d;
    int32_t len = 0, count = 0;
    if (!get32(body, &pos, &len) || len < 0 || body.size() < pos + size_t(len))
      return bad("bad document");
    d.name = body.substr(pos, size_t(len));
    pos += size_t(len);
    if (!get32(body, &pos, &count) || count < 0 || body.size() < pos + size_t(count) * 4) {
      return bad("bad document");
    }
    d.ids.resize(size_t(count));
    std::memcpy(d.ids.data(), body.data() + pos, size_t(count) * 4);
    pos += size_t(count) * 4;
    c.docs.push_back(std::move(d));
  }
  return c;
}

}  // namespace tlt::data
