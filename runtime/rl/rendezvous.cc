#include "runtime/rl/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/json_bounded.h"
#include "runtime/cluster/job_secret.h"

namespace tlt::rl {
namespace {

using nlohmann::json;

constexpr const char* kHelloPurpose = "tlt.dev/rl-worker-hello/v1";
constexpr size_t kMaxHelloBytes = 1024;  // a hello is ~130 bytes
constexpr int64_t kMaxIndex = 1 << 20;   // far more workers than any job has

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Writes a short line without blocking (the peer may be anyone: its buffer may be full).
bool send_line(int fd, const json& j) {
  std::string line = j.dump() + "\n";
  return ::send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL) == ssize_t(line.size());
}

bool out_of_resources(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

// A line's "op", or "" (not an object, no op, or one that is not a string): the peer may be
// anyone, and json::value() throws on a field of another type.
std::string op_of(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("op");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// A hello line: its index when it is well formed and proves the secret for `nonce`.
StatusOr<int> verify_hello(const std::string& line, const std::string& secret,
                           const std::string& nonce) {
  StatusOr<json> j = api::parse_json_bounded(line, "the hello", 4);
  if (!j.ok()) return j.status();
  const json& h = *j;
  if (op_of(h) != "hello" || !h.contains("index") || !h["index"].is_number_integer())
    return Status::InvalidArgument("not a hello {\"op\":\"hello\",\"index\":I,\"proof\":P}");
  if (!h.contains("proof") || !h["proof"].is_string())
    return Status::InvalidArgument("the hello carries no proof of the job secret");
  int64_t index = h["index"].get<int64_t>();
  if (index < 0 || index > kMaxIndex)
    return Status::InvalidArgument("the hello's index is outside 0.." + std::to_string(kMaxIndex));
  if (!cluster::equal_constant_time(h["proof"].get<std::string>(),
                                    hello_proof(secret, nonce, int(index))))
    return Status::InvalidArgument("the hello's proof does not match this job's secret");
  return int(index);
}

}  // namespace

std::string hello_proof(const std::string& secret, const std::string& nonce, int index) {
  return cluster::hmac_hex(
      secret, std::string(kHelloPurpose) + "\n" + nonce + "\n" + std::to_string(index));
}

StatusOr<std::unique_ptr<Rendezvous>> Rendezvous::listen(RendezvousOptions o) {
  if (o.secret.size() < 16)
    return Status::InvalidArgument(
        "the rendezvous needs the job secret (at least 16 bytes) to check the workers' hellos; "
        "set TLT_JOB_SECRET or mount the job's Secret (runtime/cluster/job_secret.h)");
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Unavailable(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(o.port));
  a.sin_addr.s_addr = htonl(o.loopback ? INADDR_LOOPBACK : INADDR_ANY);
  socklen_t n = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Status::Unavailable("cannot listen on port " + std::to_string(o.port) + ": " + why);
  }
  int port = ntohs(a.sin_port);
  return std::unique_ptr<Rendezvous>(new Rendezvous(std::move(o), fd, port));
}

Rendezvous::Rendezvous(RendezvousOptions options, int listen_fd, int port)
    : options_(std::move(options)), listen_fd_(listen_fd), port_(port) {}

Rendezvous::~Rendezvous() {
  for (const Handshake& h : handshakes_) ::close(h.fd);
  ::close(listen_fd_);
}

void Rendezvous::add_pollfds(std::vector<pollfd>* fds) const {
  if (now_ms() >= backoff_until_ms_) fds->push_back({listen_fd_, POLLIN, 0});
  for (const Handshake& h : handshakes_) fds->push_back({h.fd, POLLIN, 0});
}

std::vector<JoinedWorker> Rendezvous::service(int timeout_ms) {
  std::vector<pollfd> fds;
  add_pollfds(&fds);
  if (timeout_ms > 0) {
    // Wake for the earliest deadline or the end of a backoff, whichever comes first.
    int64_t wake = now_ms() + timeout_ms;
    for (const Handshake& h : handshakes_) wake = std::min(wake, h.deadline_ms);
    if (backoff_until_ms_ > now_ms()) wake = std::min(wake, backoff_until_ms_);
    int r = ::poll(fds.data(), fds.size(), int(std::max<int64_t>(0, wake - now_ms())));
    (void)r;  // EINTR (a signal: the caller checks its stop flag) or readiness: go on either way
  }
  std::vector<JoinedWorker> joined;
  // Handshakes first: a worker that answered is paired before new connections can push it out.
  int64_t now = now_ms();
  for (auto it = handshakes_.begin(); it != handshakes_.end();) {
    if (advance(*it, &joined)) {
      it = handshakes_.erase(it);
    } else if (now >= it->deadline_ms) {
      ++counters_.timed_out;
      ::close(it->fd);
      it = handshakes_.erase(it);
    } else {
      ++it;
    }
  }
  if (now_ms() >= backoff_until_ms_) accept_waiting();
  return joined;
}

void Rendezvous::accept_waiting() {
  // At most one cap's worth per call: a peer connecting as fast as this accepts must not keep
  // the caller (the step loop) here.
  for (int n = 0; n < std::max(1, options_.max_handshakes); ++n) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (out_of_resources(errno)) {
        ++counters_.accept_errors;
        backoff_until_ms_ = now_ms() + options_.accept_backoff_ms;
      }
      return;  // EAGAIN: nothing more waiting
    }
    ++counters_.accepted;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    StatusOr<std::string> nonce = cluster::random_nonce();
    if (!nonce.ok() || !send_line(fd, {{"op", "challenge"}, {"nonce", *nonce}})) {
      ++counters_.refused;
      ::close(fd);
      continue;
    }
    if (int(handshakes_.size()) >= std::max(1, options_.max_handshakes)) drop_oldest();
    handshakes_.push_back({fd, *nonce, now_ms() + options_.hello_timeout_ms});
  }
}

void Rendezvous::drop_oldest() {
  ++counters_.dropped;
  ::close(handshakes_.front().fd);
  handshakes_.pop_front();
}

void Rendezvous::refuse(int fd, const std::string& reason) {
  ++counters_.refused;
  (void)send_line(fd, {{"op", "refused"}, {"reason", reason}});
  ::close(fd);
}

bool Rendezvous::advance(const Handshake& h, std::vector<JoinedWorker>* joined) {
  // Peek, so that nothing after the hello's newline is consumed: it is the Channel's.
  char buf[kMaxHelloBytes];
  ssize_t n = ::recv(h.fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  if (n <= 0) {  // hung up (or reset) before a complete hello
    ++counters_.refused;
    ::close(h.fd);
    return true;
  }
  const char* nl = static_cast<const char*>(std::memchr(buf, '\n', size_t(n)));
  if (!nl) {
    if (size_t(n) < sizeof buf) return false;  // more to come
    refuse(h.fd, "no hello line within " + std::to_string(kMaxHelloBytes) + " bytes");
    return true;
  }
  size_t len = size_t(nl - buf) + 1;
  ssize_t taken = ::recv(h.fd, buf, len, MSG_DONTWAIT);
  if (taken != ssize_t(len)) {
    refuse(h.fd, "the hello could not be read");
    return true;
  }
  StatusOr<int> index = verify_hello(std::string(buf, len - 1), options_.secret, h.nonce);
  if (!index.ok()) {
    refuse(h.fd, index.status().message());
    return true;
  }
  if (!send_line(h.fd, {{"op", "welcome"}})) {
    ++counters_.refused;
    ::close(h.fd);
    return true;
  }
  // The Channel reads and writes with blocking calls from here on.
  ::fcntl(h.fd, F_SETFL, ::fcntl(h.fd, F_GETFL) & ~O_NONBLOCK);
  ++counters_.joined;
  joined->push_back({h.fd, *index});
  return true;
}

namespace {

// Reads one line from a blocking socket within the deadline, byte by byte so that nothing after
// it is consumed (the Channel reads the rest). Unavailable when the peer hangs up.
StatusOr<json> read_line(int fd, int64_t deadline_ms, const std::string& what) {
  std::string line;
  while (line.size() < 4096) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, int(std::max<int64_t>(0, deadline_ms - now_ms())));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return Status::DeadlineExceeded("the trainer sent no " + what);
    char c;
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Unavailable("the trainer hung up before its " + what);
    if (c == '\n') return api::parse_json_bounded(line, "the trainer's " + what, 4);
    line.push_back(c);
  }
  return Status::Corruption("the trainer's " + what + " is not a line");
}

// The handshake on a connected socket; InvalidArgument when the driver refused the proof.
Status handshake(int fd, int index, const std::string& secret, int64_t deadline_ms) {
  StatusOr<json> challenge = read_line(fd, deadline_ms, "challenge");
  if (!challenge.ok()) return challenge.status();
  if (op_of(*challenge) != "challenge" || !(*challenge)["nonce"].is_string())
    return Status::Unavailable("the trainer's first line is not a challenge (an older tlt?)");
  std::string nonce = (*challenge)["nonce"].get<std::string>();
  std::string hello =
      json({{"op", "hello"}, {"index", index}, {"proof", hello_proof(secret, nonce, index)}})
          .dump() +
      "\n";
  if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != ssize_t(hello.size()))
    return Status::Unavailable("hello not sent");
  StatusOr<json> answer = read_line(fd, deadline_ms, "answer to the hello");
  if (!answer.ok()) return answer.status();
  std::string op = op_of(*answer);
  if (op == "welcome") return Status::Ok();
  if (op == "refused")
    return Status::InvalidArgument(
        "the trainer refused worker " + std::to_string(index) + ": " + (*answer)["reason"].dump() +
        "; its job secret differs from this pod's (" + cluster::kSecretEnv + " or the file " +
        cluster::kSecretFileEnv + " names)");
  return Status::Unavailable("the trainer answered the hello with " +
                             answer->dump(-1).substr(0, 80));
}

// One attempt: the welcomed socket, or why not.
StatusOr<int> connect_once(const std::string& host, int port, int index, const std::string& secret,
                           int64_t deadline_ms) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int g = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (g != 0) return Status::Unavailable(std::string("resolve ") + host + ": " + gai_strerror(g));
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    std::string why = std::string("connect: ") + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::freeaddrinfo(res);
    return Status::Unavailable(why);
  }
  ::freeaddrinfo(res);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  Status st = handshake(fd, index, secret, deadline_ms);
  if (!st.ok()) {
    ::close(fd);
    return st;
  }
  return fd;
}

}  // namespace

StatusOr<int> connect_worker(const std::string& host, int port, int index,
                             const std::string& secret, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  Status last = Status::Unavailable("not tried");
  while (now_ms() < deadline) {
    StatusOr<int> fd = connect_once(host, port, index, secret, deadline);
    if (fd.ok() || fd.status().code() == StatusCode::kInvalidArgument) return fd;
    last = fd.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return Status::DeadlineExceeded("cannot reach the trainer at " + host + ":" +
                                  std::to_string(port) + " (" + last.message() + ")");
}

}  // namespace tlt::rl
