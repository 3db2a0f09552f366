// A rogue peer of an RLJob trainer's rendezvous port (issue 51): a process on the cluster network
// that does not hold the job secret and speaks the driver <-> worker protocol
// (runtime/rl/rendezvous.h, runtime/rl/channel.h) by hand. tests/cli/rl_rogue_peer.sh runs it
// against a `tlt run-role` trainer on loopback.
//
//   rogue_peer capture LISTEN_PORT FILE
//       A fake trainer: challenges the first connection and writes the hello it answers (a real
//       worker's, proving the secret for that challenge only) to FILE.
//   rogue_peer attack PORT SECONDS [CAPTURED_FILE]
//       Until SECONDS pass (or the trainer is gone once it was up), at once:
//         takeover: every 200 ms a connection says hello as worker 0: without a proof, with a
//                   wrong proof, and replaying CAPTURED_FILE's hello; each then sends op:file
//                   frames for policy-v0.ckpt and ../x (content ROGUE-MARKER) and a "completed"
//                   and a "generated" reply naming them;
//         silent:   one connection a second that never says anything (kept open);
//         flood:    300 connections, each with a hello for an unknown index (kept open).
//       Prints "rogue: port open" once connected, then one line per attack with its counts.
//
// Exit status: 0 when the trainer never let it in (no answer but a challenge or a refusal), 3
// when it did (a "welcome", a setup or any other message), 2 for bad arguments or no trainer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_joined{false};
std::atomic<bool> g_trainer_up{false};
std::mutex g_out;

void say(const std::string& s) {
  std::lock_guard<std::mutex> lock(g_out);
  std::cout << "rogue: " << s << std::endl;
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    if (!g_trainer_up.exchange(true)) say("port open");
    return fd;
  }
  if (fd >= 0) ::close(fd);
  return -1;
}

void send_text(int fd, const std::string& s) {
  (void)::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
}

// The next line within timeout_ms; "" on a timeout or an end.
std::string read_line(int fd, int timeout_ms) {
  std::string line;
  auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char c;
    if (::recv(fd, &c, 1, 0) != 1) return "";
    if (c == '\n') return line;
    line.push_back(c);
  }
  return "";
}

// What the trainer said after a hello: "refused", "closed" (an end, nothing said) or "JOINED"
// (anything else: a welcome, a setup or a generate message).
std::string verdict(int fd) {
  std::string line = read_line(fd, 3000);
  if (line.empty()) return "closed";
  json j = json::parse(line, nullptr, false);
  if (j.is_object() && j["op"] == "refused") return "refused";
  g_joined = true;
  return "JOINED (" + line.substr(0, 60) + ")";
}

// What a worker that got in would do with its connection: write files the driver never asked
// for and answer requests it was never sent.
std::string payload() {
  std::string marker = "ROGUE-MARKER";
  std::string out;
  for (const char* rel : {"policy-v0.ckpt", "../x", "buffer/step-1-w0.pt"})
    out += json{{"op", "file"}, {"rel", rel}, {"size", marker.size()}}.dump() + "\n" + marker;
  out +=
      json{
          {"op", "completed"}, {"step", 1}, {"policy_version", 0}, {"id", 0}, {"tokens", {1, 2, 3}}}
          .dump() +
      "\n";
  out += json{{"op", "generated"},
              {"step", 1},
              {"worker", 0},
              {"policy_version", 0},
              {"drafter_version", 0},
              {"completions", json::array()},
              {"buffer", "@/policy-v0.ckpt"}}
             .dump() +
         "\n";
  return out;
}

// One takeover attempt: hello as worker 0 with `proof` (none when empty; "CAPTURED" sends the
// captured line as it is). Returns the trainer's verdict, or "" when the port is closed.
std::string try_takeover(int port, const std::string& proof, const std::string& captured) {
  int fd = connect_to(port);
  if (fd < 0) return "";
  (void)read_line(fd, 2000);  // the challenge (an older trainer sends none)
  json hello = {{"op", "hello"}, {"index", 0}};
  if (!proof.empty()) hello["proof"] = proof;
  std::string line = proof == "CAPTURED" ? captured : hello.dump();
  send_text(fd, line + "\n" + payload());
  std::string v = verdict(fd);
  ::close(fd);
  return v;
}

void takeover(int port, Clock::time_point end, const std::string& captured) {
  std::vector<std::string> proofs = {"", std::string(64, 'a')};
  if (!captured.empty()) proofs.push_back("CAPTURED");
  std::vector<int> refused(proofs.size(), 0), closed(proofs.size(), 0);
  bool gone = false;
  while (Clock::now() < end && !gone) {
    for (size_t i = 0; i < proofs.size() && !gone; ++i) {
      std::string v = try_takeover(port, proofs[i], captured);
      gone = v.empty() && g_trainer_up;
      if (v == "refused") ++refused[i];
      if (v == "closed") ++closed[i];
      if (v.rfind("JOINED", 0) == 0) say("takeover " + std::to_string(i) + ": " + v);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const char* names[] = {"no proof", "wrong proof", "replayed hello"};
  for (size_t i = 0; i < proofs.size(); ++i)
    say(std::string("takeover (") + names[i] + "): " + std::to_string(refused[i]) + " refused, " +
        std::to_string(closed[i]) + " closed");
}

// Everything the trainer has sent on fd so far, and whether it closed the connection.
std::pair<std::string, bool> drain(int fd) {
  std::string data;
  char buf[512];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      data.append(buf, size_t(n));
      continue;
    }
    return {data, n == 0};
  }
}

// Whether `data` holds a line other than a challenge or a refusal (the trainer let it in).
bool let_in(const std::string& data) {
  size_t start = 0;
  for (size_t nl; (nl = data.find('\n', start)) != std::string::npos; start = nl + 1) {
    json j = json::parse(data.substr(start, nl - start), nullptr, false);
    if (!j.is_object() || (j["op"] != "challenge" && j["op"] != "refused")) return true;
  }
  return false;
}

void silent(int port, Clock::time_point end) {
  std::vector<int> open;
  while (Clock::now() < end) {
    int fd = connect_to(port);
    if (fd < 0 && g_trainer_up) break;
    if (fd >= 0) open.push_back(fd);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  int closed = 0;
  for (int fd : open) {
    auto [data, end_seen] = drain(fd);
    closed += end_seen;
    if (let_in(data)) g_joined = true;
    ::close(fd);
  }
  say("silent: " + std::to_string(open.size()) + " connections, " + std::to_string(closed) +
      " closed by the trainer");
}

void flood(int port, Clock::time_point end) {
  while (!g_trainer_up && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::vector<int> open;
  for (int i = 0; i < 300 && Clock::now() < end; ++i) {
    int fd = connect_to(port);
    if (fd < 0) break;
    send_text(fd, json{{"op", "hello"}, {"index", 1000 + i}}.dump() + "\n");
    open.push_back(fd);
  }
  // The trainer closes them as it serves its port (between phases that do not): wait for all.
  int joined = 0, closed = 0;
  std::vector<bool> done(open.size(), false);
  std::vector<std::string> got(open.size());
  auto give_up = Clock::now() + std::chrono::seconds(60);
  while (closed < int(open.size()) && Clock::now() < give_up) {
    for (size_t i = 0; i < open.size(); ++i) {
      if (done[i]) continue;
      auto [data, end_seen] = drain(open[i]);
      got[i] += data;
      if (end_seen) done[i] = true, ++closed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (size_t i = 0; i < open.size(); ++i) {
    if (let_in(got[i])) ++joined, g_joined = true;
    ::close(open[i]);
  }
  say("flood: " + std::to_string(open.size()) + " hellos for unknown indexes, " +
      std::to_string(closed) + " closed by the trainer, " + std::to_string(joined) + " let in");
}

int capture(int listen_port, const std::string& file) {
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(listen_port));
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 4) != 0) {
    say("capture: cannot listen on " + std::to_string(listen_port));
    return 2;
  }
  say("capture: listening");
  int fd = ::accept(lfd, nullptr, nullptr);
  send_text(fd,
            json{{"op", "challenge"}, {"nonce", "00112233445566778899aabbccddeeff"}}.dump() + "\n");
  std::string hello = read_line(fd, 30000);
  ::close(fd);
  ::close(lfd);
  if (hello.empty()) {
    say("capture: no hello");
    return 2;
  }
  std::ofstream(file) << hello << "\n";
  say("capture: " + hello);
  return 0;
}

int attack(int port, int seconds, const std::string& captured_file) {
  std::string captured;
  if (!captured_file.empty()) {
    std::ifstream in(captured_file);
    std::getline(in, captured);
    if (captured.empty()) {
      say("no captured hello in " + captured_file);
      return 2;
    }
  }
  Clock::time_point end = Clock::now() + std::chrono::seconds(seconds);
  std::thread t1(takeover, port, end, captured), t2(silent, port, end), t3(flood, port, end);
  t1.join(), t2.join(), t3.join();
  if (!g_trainer_up) {
    say("the trainer's port never opened");
    return 2;
  }
  say(g_joined ? "the trainer LET THE ROGUE IN" : "the trainer let the rogue in nowhere");
  return g_joined ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "capture" && argc == 4) return capture(std::atoi(argv[2]), argv[3]);
  if (mode == "attack" && (argc == 4 || argc == 5))
    return attack(std::atoi(argv[2]), std::atoi(argv[3]), argc == 5 ? argv[4] : "");
  std::cerr << "usage: rogue_peer capture LISTEN_PORT FILE | attack PORT SECONDS [CAPTURED]\n";
  return 2;
}
