#include "runtime/rl/channel.h"

#include <poll.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "api/json_bounded.h"
#include "runtime/io/atomic_file.h"
#include "runtime/rl/run_dir.h"

namespace tlt::rl {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFileFields[] = {"policy", "drafter", "buffer"};
constexpr const char* kMarker = "@/";  // a path relative to the receiver's directory

// `path` relative to `dir`, or "" when it is not under it.
std::string relative_to(const std::string& dir, const std::string& path) {
  if (path.size() <= dir.size() + 1 || path.compare(0, dir.size(), dir) != 0 ||
      path[dir.size()] != '/')
    return "";
  return path.substr(dir.size() + 1);
}

// A message's "op", or "" (not an object, no op, or one that is not a string).
std::string op_of(const nlohmann::json& m) {
  if (!m.is_object()) return "";
  auto it = m.find("op");
  return it != m.end() && it->is_string() ? it->get<std::string>() : "";
}

// Whether `name` matches `pattern` ('#': one or more decimal digits).
bool matches(const std::string& pattern, const std::string& name) {
  size_t i = 0;
  for (char p : pattern) {
    if (p != '#') {
      if (i >= name.size() || name[i] != p) return false;
      ++i;
      continue;
    }
    size_t start = i;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
    if (i == start) return false;
  }
  return i == name.size();
}

}  // namespace

std::vector<MirrorRule> worker_mirror_rules() {
  return {{"generate", "policy", policy_name("#")},
          {"generate", "drafter", drafter_name("#")},
          {"train", "buffers", buffer_name("#", "#")}};
}

std::vector<MirrorRule> driver_mirror_rules(int index) {
  std::string w = std::to_string(index);
  return {{"generated", "buffer", buffer_name("#", w)},
          {"trained", "drafter", worker_drafter_name(w)}};
}

Status Channel::write_all(const char* data, size_t size) {
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::write(out_, data + off, size - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Unavailable(std::string("peer gone: ") + std::strerror(errno));
    off += size_t(n);
  }
  return Status::Ok();
}

Status Channel::send(const nlohmann::json& message) {
  std::string line;
  if (mirror_dir_.empty()) {
    line = message.dump() + "\n";
  } else {
    StatusOr<nlohmann::json> m = outgoing(message);
    if (!m.ok()) return m.status();
    line = m->dump() + "\n";
  }
  return write_all(line.data(), line.size());
}

namespace {

// "size:mtime" of `path`, or "" when it cannot be read.
std::string file_state(const std::string& path) {
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  if (ec) return "";
  auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  return ec ? "" : std::to_string(size) + ":" + std::to_string(mtime);
}

}  // namespace

void Channel::mark_mirrored(const std::string& path) {
  if (mirror_dir_.empty()) return;
  std::string rel = relative_to(mirror_dir_, path), state = file_state(path);
  if (!rel.empty() && !state.empty()) sent_[rel] = state;
}

Status Channel::send_file(const std::string& path) {
  std::string rel = relative_to(mirror_dir_, path);
  std::string state = file_state(path);
  if (state.empty()) return Status::FailedPrecondition(path + ": cannot be read");
  if (sent_[rel] == state) return Status::Ok();
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return Status::FailedPrecondition(path + ": cannot read");
  std::string header =
      nlohmann::json({{"op", "file"}, {"rel", rel}, {"size", bytes.size()}}).dump() + "\n";
  TLT_RETURN_IF_ERROR(write_all(header.data(), header.size()));
  TLT_RETURN_IF_ERROR(write_all(bytes.data(), bytes.size()));
  sent_[rel] = state;
  return Status::Ok();
}

StatusOr<nlohmann::json> Channel::outgoing(const nlohmann::json& message) {
  nlohmann::json m = message;
  auto one = [&](nlohmann::json& v) -> Status {
    if (!v.is_string()) return Status::Ok();
    std::string rel = relative_to(mirror_dir_, v.get<std::string>());
    if (rel.empty()) return Status::Ok();
    TLT_RETURN_IF_ERROR(send_file(v.get<std::string>()));
    v = kMarker + rel;
    return Status::Ok();
  };
  for (const char* f : kFileFields)
    if (m.contains(f)) TLT_RETURN_IF_ERROR(one(m[f]));
  if (m.contains("buffers") && m["buffers"].is_array())
    for (nlohmann::json& v : m["buffers"]) TLT_RETURN_IF_ERROR(one(v));
  if (m.contains("dir") && m["dir"] == mirror_dir_) m["dir"] = "@";
  return m;
}

bool Channel::allowed(const std::string& op, const std::string& field,
                      const std::string& rel) const {
  for (const MirrorRule& r : accept_)
    if (r.op == op && r.field == field && matches(r.pattern, rel)) return true;
  return false;
}

Status Channel::incoming(nlohmann::json* m) {
  std::string op = op_of(*m);
  std::vector<bool> named(received_.size(), false);
  auto one = [&](nlohmann::json& v, const std::string& field) -> Status {
    if (v.is_string() && v.get<std::string>().empty()) return Status::Ok();
    std::string s = v.is_string() ? v.get<std::string>() : "";
    if (s.rfind(kMarker, 0) != 0)
      return Status::Corruption("message \"" + op + "\": field " + field + " names " +
                                v.dump().substr(0, 80) + ", not a file of this side's directory");
    std::string rel = s.substr(2);
    if (!allowed(op, field, rel))
      return Status::Corruption("message \"" + op + "\": field " + field + " may not name \"" +
                                rel.substr(0, 80) + "\"");
    for (size_t i = 0; i < received_.size(); ++i)
      if (received_[i].first == rel) named[i] = true;
    v = mirror_dir_ + "/" + rel;
    return Status::Ok();
  };
  if (m->is_object()) {
    for (const char* f : kFileFields)
      if (m->contains(f)) TLT_RETURN_IF_ERROR(one((*m)[f], f));
    if (m->contains("buffers")) {
      if (!(*m)["buffers"].is_array())
        return Status::Corruption("message \"" + op + "\": field buffers is not an array");
      for (nlohmann::json& v : (*m)["buffers"]) TLT_RETURN_IF_ERROR(one(v, "buffers"));
    }
    if (m->contains("dir") && (*m)["dir"] == "@") (*m)["dir"] = mirror_dir_;
  }
  for (size_t i = 0; i < received_.size(); ++i)
    if (!named[i])
      return Status::Corruption("file \"" + received_[i].first + "\" came before a message \"" +
                                op + "\" that does not name it");
  for (const auto& [rel, bytes] : received_) {
    fs::path path = fs::path(mirror_dir_) / rel;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    // A mirror of the sender's file, re-sent after a reconnect: no sync.
    TLT_RETURN_IF_ERROR(io::atomic_write(path.string(), bytes, io::Sync::kNone));
  }
  received_.clear();
  return Status::Ok();
}

Status Channel::take_file_frame(nlohmann::json j, const std::string& line) {
  if (!j.contains("rel") || !j["rel"].is_string() || !j.contains("size") ||
      !j["size"].is_number_unsigned())
    return Status::Corruption("bad file frame: " + line.substr(0, 80));
  std::string rel = j["rel"].get<std::string>();
  bool any = false;
  for (const MirrorRule& r : accept_) any = any || matches(r.pattern, rel);
  if (!any)
    return Status::Corruption("file frame names \"" + rel.substr(0, 80) +
                              "\", which this side does not take from its peer");
  file_header_ = std::move(j);
  return Status::Ok();
}

Status Channel::split_lines() {
  for (;;) {
    if (file_header_) {  // the bytes of a mirrored file: kept until the message naming it
      size_t size = file_header_->at("size").get<size_t>();
      if (partial_.size() < size) return Status::Ok();
      received_.emplace_back(file_header_->at("rel").get<std::string>(), partial_.substr(0, size));
      partial_.erase(0, size);
      file_header_.reset();
      continue;
    }
    size_t nl = partial_.find('\n');
    if (nl == std::string::npos) return Status::Ok();
    std::string line = partial_.substr(0, nl);
    partial_.erase(0, nl + 1);
    StatusOr<nlohmann::json> parsed = api::parse_json_bounded(line, "a channel message");
    if (!parsed.ok())
      return Status::Corruption(parsed.status().message() + ": " + line.substr(0, 80));
    nlohmann::json j = std::move(*parsed);
    if (!mirror_dir_.empty() && op_of(j) == "file") {
      TLT_RETURN_IF_ERROR(take_file_frame(std::move(j), line));
      continue;
    }
    if (!mirror_dir_.empty()) TLT_RETURN_IF_ERROR(incoming(&j));
    ready_.push_back(std::move(j));
  }
}

Status Channel::pump() {
  if (eof_) return Status::Unavailable("peer closed the channel");
  char buf[65536];
  for (;;) {
    pollfd p{in_, POLLIN, 0};
    int r = ::poll(&p, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) break;
    ssize_t n = ::read(in_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof_ = true;
      break;
    }
    partial_.append(buf, size_t(n));
  }
  Status st = split_lines();
  if (!st.ok()) return st;
  if (eof_ && ready_.empty()) return Status::Unavailable("peer closed the channel");
  return Status::Ok();
}

std::optional<nlohmann::json> Channel::pop() {
  if (ready_.empty()) return std::nullopt;
  nlohmann::json j = std::move(ready_.front());
  ready_.pop_front();
  return j;
}

StatusOr<std::optional<nlohmann::json>> Channel::receive(int timeout_ms) {
  if (!ready_.empty()) return pop();
  pollfd p{in_, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::optional<nlohmann::json>();
  TLT_RETURN_IF_ERROR(pump());
  return pop();
}

}  // namespace tlt::rl
