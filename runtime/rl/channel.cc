#include "runtime/rl/channel.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tlt::rl {

Status Channel::send(const nlohmann::json& message) {
  std::string line = message.dump() + "\n";
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(out_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Unavailable(std::string("peer gone: ") + std::strerror(errno));
    off += size_t(n);
  }
  return Status::Ok();
}

Status Channel::split_lines() {
  size_t nl;
  while ((nl = partial_.find('\n')) != std::string::npos) {
    std::string line = partial_.substr(0, nl);
    partial_.erase(0, nl + 1);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Status::Corruption("not a JSON message: " + line.substr(0, 80));
    ready_.push_back(std::move(j));
  }
  return Status::Ok();
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
