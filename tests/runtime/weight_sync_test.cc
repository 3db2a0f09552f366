// The weight-sync group (runtime/rl/weight_sync.h): ranks as threads of this test on one Gloo
// group. Publishes cut into many small buckets arrive bit-exact; a corrupted bucket and a stale
// version are refused (Corruption, counted, the module untouched) while the group stays in step
// for the next publish. A peer without the job's proof can neither join (it waits alone) nor
// receive, beside members that publish normally; a rank 0 without the publish key is refused and
// left; a local group (a store file) listens on nothing beyond 127.0.0.1.
#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "api/fnv.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/weight_sync.h"

namespace tlt::rl {
namespace {

// A group's proof made from `key`: the run's is HMAC-SHA256 under the job secret
// (runtime/rl/weight_publisher.h, outside tlt_core); this keyed stand-in is enough here, where
// what matters is that a peer with another key computes another prefix and other MACs.
WeightSyncAuth test_auth(const std::string& key) {
  WeightSyncAuth a;
  a.store_prefix = "tlt-ws/test-" + std::to_string(fnv1a64("store " + key));
  a.mac = [key](const std::string& statement) {
    std::string hex;
    char buf[17];
    for (int i = 0; i < 4; ++i) {
      std::snprintf(buf, sizeof buf, "%016llx",
                    static_cast<unsigned long long>(fnv1a64(std::to_string(i) + key + statement)));
      hex += buf;
    }
    return hex;  // 64 hex digits
  };
  return a;
}

model::ModelConfig cfg() {
  model::ModelConfig c;
  c.vocab = 50, c.dim = 16, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.ffn = 32;
  c.max_seq = 64;
  return c;
}

bool same(model::Transformer& a, model::Transformer& b) {
  std::vector<torch::Tensor> x = synced_tensors(*a), y = synced_tensors(*b);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!torch::equal(x[i], y[i])) return false;
  return true;
}

TEST(WeightSync, ChecksumSeesOneByte) {
  torch::Tensor a = torch::randint(0, 256, {1003}, torch::kUInt8);  // a 3-byte tail
  torch::Tensor b = a.clone();
  EXPECT_EQ(weight_checksum(a), weight_checksum(b));
  for (int64_t i : {0, 500, 1001, 1002}) {
    b = a.clone();
    b[i] = uint8_t(b[i].item<int>() ^ 1);
    EXPECT_NE(weight_checksum(a), weight_checksum(b)) << "byte " << i;
  }
  EXPECT_NE(weight_checksum(a.narrow(0, 0, 1002)), weight_checksum(a));
}

// A CUDA group's checksum (computed with tensor operations where the bytes are; here on the
// CPU, the same operations a GPU runs): one flipped byte, two swapped words, a shorter buffer or
// a trailing zero byte change it; a misaligned view of the same bytes does not.
TEST(WeightSync, DeviceChecksumSeesOneByteAndWhereEachWordIs) {
  torch::Tensor a = torch::randint(0, 256, {1003}, torch::kUInt8);  // a 3-byte tail
  EXPECT_EQ(device_weight_checksum(a), device_weight_checksum(a.clone()));
  for (int64_t i : {0, 7, 8, 500, 1001, 1002}) {
    torch::Tensor b = a.clone();
    b[i] = uint8_t(b[i].item<int>() ^ 1);
    EXPECT_NE(device_weight_checksum(a), device_weight_checksum(b)) << "byte " << i;
  }
  torch::Tensor swapped = a.clone();  // words 0 and 1 exchanged: the same multiset of words
  swapped.narrow(0, 0, 8).copy_(a.narrow(0, 8, 8));
  swapped.narrow(0, 8, 8).copy_(a.narrow(0, 0, 8));
  if (!torch::equal(a.narrow(0, 0, 8), a.narrow(0, 8, 8))) {
    EXPECT_NE(device_weight_checksum(a), device_weight_checksum(swapped));
  }
  EXPECT_NE(device_weight_checksum(a.narrow(0, 0, 1002)), device_weight_checksum(a));
  torch::Tensor zero_tail = torch::cat({a, torch::zeros({1}, torch::kUInt8)});
  EXPECT_NE(device_weight_checksum(zero_tail), device_weight_checksum(a));
  torch::Tensor shifted = torch::cat({torch::zeros({3}, torch::kUInt8), a}).narrow(0, 3, 1003);
  EXPECT_EQ(device_weight_checksum(shifted), device_weight_checksum(a));  // a view at offset 3
}

TEST(WeightSync, BroadcastVerifiesAndRefuses) {
  torch::manual_seed(1);
  constexpr int kWorld = 3;
  std::vector<std::unique_ptr<WeightSync>> ranks(kWorld);
  WeightSyncOptions o;
  o.world = kWorld, o.bucket_bytes = 4096, o.timeout_s = 60;
  o.auth = test_auth("job");
  StatusOr<std::unique_ptr<WeightSync>> r0 = WeightSync::open(o);
  ASSERT_TRUE(r0.ok()) << r0.status().message();
  ranks[0] = std::move(*r0);
  o.port = ranks[0]->port();
  for (int r = 1; r < kWorld; ++r) {
    o.rank = r;
    StatusOr<std::unique_ptr<WeightSync>> s = WeightSync::open(o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ranks[size_t(r)] = std::move(*s);
  }
  std::vector<Status> joined(kWorld);
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r)
    ts.emplace_back([&, r] { joined[size_t(r)] = ranks[r]->join(); });
  for (std::thread& t : ts) t.join();
  if (joined[0].code() == StatusCode::kUnimplemented) GTEST_SKIP() << joined[0].message();
  for (const Status& s : joined) ASSERT_TRUE(s.ok()) << s.message();

  model::Transformer policy(cfg());
  std::vector<model::Transformer> workers;
  for (int r = 1; r < kWorld; ++r) workers.push_back(model::Transformer(cfg()));
  ASSERT_FALSE(same(policy, workers[0]));
  // One publish: rank 0 sends `version` (corrupting bucket `bad`), the others expect `expect`.
  auto publish = [&](int64_t version, int64_t expect, int64_t bad) {
    std::vector<Status> st(kWorld);
    std::vector<std::thread> ts;
    for (int r = 0; r < kWorld; ++r) {
      ts.emplace_back([&, r] {
        st[size_t(r)] =
            r == 0 ? ranks[0]->publish(WeightKind::kPolicy, version, synced_tensors(*policy), bad)
                   : ranks[size_t(r)]->receive(WeightKind::kPolicy, expect,
                                               synced_tensors(*workers[size_t(r) - 1]));
      });
    }
    for (std::thread& t : ts) t.join();
    return st;
  };
  int64_t buckets = 0;
  for (const torch::Tensor& t : synced_tensors(*policy)) buckets += t.numel() * t.element_size();
  ASSERT_GT(buckets / o.bucket_bytes, 4);  // several buckets, the last one shorter

  std::vector<Status> st = publish(1, 1, 3);  // bucket 3 corrupted: refused, untouched
  ASSERT_TRUE(st[0].ok()) << st[0].message();
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_EQ(st[size_t(r)].code(), StatusCode::kCorruption) << st[size_t(r)].message();
    EXPECT_NE(st[size_t(r)].message().find("bucket 3 of"), std::string::npos);
    EXPECT_EQ(ranks[size_t(r)]->refused(), 1);
  }
  EXPECT_FALSE(same(policy, workers[0]));
  st = publish(2, 1, -1);  // a version the worker does not expect: refused
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_EQ(st[size_t(r)].code(), StatusCode::kCorruption) << st[size_t(r)].message();
    EXPECT_EQ(ranks[size_t(r)]->refused(), 2);
  }
  EXPECT_FALSE(same(policy, workers[1]));
  st = publish(3, 3, -1);  // the group is still in step: this one arrives bit-exact
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(same(policy, workers[0]));
  EXPECT_TRUE(same(policy, workers[1]));
  EXPECT_EQ(ranks[1]->refused(), 2);

  // A publish of another size (a larger vocabulary) passes through a scratch bucket: refused,
  // the module untouched, and the group still in step.
  model::ModelConfig larger = cfg();
  larger.vocab = 70;
  model::Transformer other(larger);
  std::vector<Status> sized(kWorld);
  std::vector<std::thread> ts2;
  for (int r = 0; r < kWorld; ++r)
    ts2.emplace_back([&, r] {
      sized[size_t(r)] = r == 0
                             ? ranks[0]->publish(WeightKind::kPolicy, 4, synced_tensors(*other))
                             : ranks[size_t(r)]->receive(WeightKind::kPolicy, 4,
                                                         synced_tensors(*workers[size_t(r) - 1]));
    });
  for (std::thread& t : ts2) t.join();
  ASSERT_TRUE(sized[0].ok()) << sized[0].message();
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_EQ(sized[size_t(r)].code(), StatusCode::kCorruption) << sized[size_t(r)].message();
    EXPECT_NE(sized[size_t(r)].message().find("bytes, the model"), std::string::npos);
  }
  EXPECT_TRUE(same(policy, workers[0]));
  st = publish(5, 5, -1);
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(ranks[1]->refused(), 3);
}

// Joins `ranks` on threads of their own; their statuses in rank order.
std::vector<Status> join_all(const std::vector<WeightSync*>& ranks) {
  std::vector<Status> joined(ranks.size());
  std::vector<std::thread> ts;
  for (size_t r = 0; r < ranks.size(); ++r)
    ts.emplace_back([&, r] { joined[r] = ranks[r]->join(); });
  for (std::thread& t : ts) t.join();
  return joined;
}

std::unique_ptr<WeightSync> open_rank(WeightSyncOptions o, int rank, const std::string& key) {
  o.rank = rank, o.auth = test_auth(key);
  StatusOr<std::unique_ptr<WeightSync>> s = WeightSync::open(o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

// Rank 0 publishes `policy` as v`version` while rank r > 0 receives into receivers[r - 1];
// every rank's status.
std::vector<Status> publish_on_threads(const std::vector<WeightSync*>& ranks,
                                       model::Transformer& policy,
                                       std::vector<model::Transformer>& receivers,
                                       int64_t version) {
  std::vector<Status> st(ranks.size());
  std::vector<std::thread> ts;
  for (size_t r = 0; r < ranks.size(); ++r)
    ts.emplace_back([&, r] {
      st[r] = r == 0 ? ranks[0]->publish(WeightKind::kPolicy, version, synced_tensors(*policy))
                     : ranks[r]->receive(WeightKind::kPolicy, version,
                                         synced_tensors(*receivers[r - 1]));
    });
  for (std::thread& t : ts) t.join();
  return st;
}

WeightSyncOptions short_options(int world) {
  WeightSyncOptions o;
  o.world = world, o.bucket_bytes = 4096;
  o.rendezvous_timeout_s = 3, o.timeout_s = 5;  // the rogue's join gives up soon
  return o;
}

// The takeover of the issue: a process that connects to rank 0's store (c10d accepts any) and
// tries to join as rank 1 without the job's proof waits under keys no member uses: neither it
// nor rank 0 forms a group with it, and a publish gives it no weights.
TEST(WeightSyncProof, PeerWithoutTheSecretNeitherJoinsAsRankOneNorReceives) {
  torch::manual_seed(2);
  WeightSyncOptions o = short_options(2);
  std::unique_ptr<WeightSync> r0 = open_rank(o, 0, "job");
  ASSERT_TRUE(r0);
  o.port = r0->port();
  std::unique_ptr<WeightSync> rogue = open_rank(o, 1, "a guess");
  ASSERT_TRUE(rogue);
  std::vector<Status> joined = join_all({r0.get(), rogue.get()});
  if (joined[0].code() == StatusCode::kUnimplemented) GTEST_SKIP() << joined[0].message();
  EXPECT_FALSE(joined[0].ok()) << "rank 0 formed a group with a peer that has no proof";
  EXPECT_FALSE(joined[1].ok()) << "the peer without the proof joined as rank 1";
  model::Transformer policy(cfg());
  std::vector<model::Transformer> stolen{model::Transformer(cfg())};
  std::vector<Status> st = publish_on_threads({r0.get(), rogue.get()}, policy, stolen, 0);
  EXPECT_FALSE(st[1].ok());
  EXPECT_FALSE(same(policy, stolen[0])) << "the weights left the job";
}

// Beside a rogue racing for rank 1, the members with the proof join and publish as usual.
TEST(WeightSyncProof, MembersPublishBitExactBesideARogueRankOne) {
  torch::manual_seed(3);
  WeightSyncOptions o = short_options(3);
  o.rendezvous_timeout_s = 60;
  std::unique_ptr<WeightSync> r0 = open_rank(o, 0, "job");
  ASSERT_TRUE(r0);
  o.port = r0->port();
  WeightSyncOptions rogue_o = o;
  rogue_o.rendezvous_timeout_s = 3;
  std::unique_ptr<WeightSync> rogue = open_rank(rogue_o, 1, "a guess");
  ASSERT_TRUE(rogue);
  Status rogue_joined;
  std::thread racer([&] { rogue_joined = rogue->join(); });  // it asks first
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::unique_ptr<WeightSync> r1 = open_rank(o, 1, "job"), r2 = open_rank(o, 2, "job");
  ASSERT_TRUE(r1 && r2);
  std::vector<WeightSync*> members{r0.get(), r1.get(), r2.get()};
  std::vector<Status> joined = join_all(members);
  racer.join();
  if (joined[0].code() == StatusCode::kUnimplemented) GTEST_SKIP() << joined[0].message();
  for (const Status& s : joined) ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(rogue_joined.ok());
  model::Transformer policy(cfg());
  std::vector<model::Transformer> workers{model::Transformer(cfg()), model::Transformer(cfg())};
  std::vector<Status> st = publish_on_threads(members, policy, workers, 4);
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(same(policy, workers[0]));
  EXPECT_TRUE(same(policy, workers[1]));
}

// A rank 0 that knows the store's keys but not the publish key (an impostor hosting the store)
// cannot feed weights: the receiver refuses the publish before its buckets and leaves the group.
TEST(WeightSyncProof, PublishWithoutTheKeyIsRefusedAndTheReceiverLeaves) {
  torch::manual_seed(4);
  WeightSyncOptions o = short_options(2);
  o.rendezvous_timeout_s = 60;
  o.auth = test_auth("job");
  o.auth.mac = test_auth("a guess").mac;
  StatusOr<std::unique_ptr<WeightSync>> impostor = WeightSync::open(o);
  ASSERT_TRUE(impostor.ok()) << impostor.status().message();
  o.port = (*impostor)->port();
  std::unique_ptr<WeightSync> r1 = open_rank(o, 1, "job");
  ASSERT_TRUE(r1);
  std::vector<Status> joined = join_all({impostor->get(), r1.get()});
  if (joined[0].code() == StatusCode::kUnimplemented) GTEST_SKIP() << joined[0].message();
  for (const Status& s : joined) ASSERT_TRUE(s.ok()) << s.message();
  model::Transformer fake(cfg());
  std::vector<model::Transformer> worker{model::Transformer(cfg())};
  std::vector<Status> st = publish_on_threads({impostor->get(), r1.get()}, fake, worker, 1);
  EXPECT_EQ(st[1].code(), StatusCode::kCorruption) << st[1].message();
  EXPECT_NE(st[1].message().find("no valid proof of the job secret"), std::string::npos)
      << st[1].message();
  EXPECT_TRUE(r1->broken());
  EXPECT_EQ(r1->refused(), 1);
  EXPECT_FALSE(same(fake, worker[0]));
}

// The TCP sockets this process listens on: "v4 <hex address>" or "v6 <hex address>" (as
// /proc/net/tcp{,6} print them) with the port, one per socket.
std::multiset<std::string> listening_sockets() {
  std::set<std::string> inodes;  // "socket:[N]" of this process's descriptors
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[128];
      std::string link = std::string("/proc/self/fd/") + e->d_name;
      ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
      if (n > 0) inodes.insert(std::string(target, size_t(n)));
    }
    closedir(d);
  }
  std::multiset<std::string> out;
  for (const char* family : {"tcp", "tcp6"}) {
    std::ifstream f(std::string("/proc/self/net/") + family);
    std::string line;
    std::getline(f, line);  // the header
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      in >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state == "0A" && inodes.count("socket:[" + inode + "]"))  // 0A: LISTEN
        out.insert(std::string(family) + " " + local);
    }
  }
  return out;
}

// "tcp 0100007F:port" (127.0.0.1, bytes in memory order), "tcp6" ::1 or ::ffff:127.x.y.z.
bool loopback(const std::string& socket) {
  std::string family = socket.substr(0, socket.find(' '));
  std::string addr = socket.substr(socket.find(' ') + 1);
  addr = addr.substr(0, addr.find(':'));
  if (family == "tcp") return addr.size() == 8 && addr.substr(6, 2) == "7F";
  return addr == "00000000000000000000000001000000" ||
         (addr.substr(0, 24) == "0000000000000000FFFF0000" && addr.substr(30, 2) == "7F");
}

// The bind of the issue: a local group meets at a file and nothing of it listens beyond
// 127.0.0.1 (LibTorch's TCPStore server binds every interface).
TEST(WeightSyncProof, LocalGroupListensOnLoopbackOnly) {
  char dir_template[] = "/tmp/tlt-ws-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);  // 0700
  const std::string dir = dir_template;
  std::multiset<std::string> before = listening_sockets();
  WeightSyncOptions o = short_options(2);
  o.rendezvous_timeout_s = 60;
  o.store_file = dir + "/g1";
  std::unique_ptr<WeightSync> r0 = open_rank(o, 0, "job"), r1 = open_rank(o, 1, "job");
  ASSERT_TRUE(r0 && r1);
  EXPECT_EQ(r0->port(), 0);
  std::vector<Status> joined = join_all({r0.get(), r1.get()});
  if (joined[0].code() == StatusCode::kUnimplemented) GTEST_SKIP() << joined[0].message();
  for (const Status& s : joined) ASSERT_TRUE(s.ok()) << s.message();
  std::multiset<std::string> after = listening_sockets();
  for (const std::string& s : before)
    if (after.count(s)) after.erase(after.find(s));
  for (const std::string& s : after) EXPECT_TRUE(loopback(s)) << "the group listens at " << s;
  model::Transformer policy(cfg());
  std::vector<model::Transformer> worker{model::Transformer(cfg())};
  std::vector<Status> st = publish_on_threads({r0.get(), r1.get()}, policy, worker, 2);
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(same(policy, worker[0]));
  r0.reset(), r1.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(WeightSyncProof, GroupWithoutAProofIsRefusedAtOpen) {
  WeightSyncOptions o = short_options(2);
  StatusOr<std::unique_ptr<WeightSync>> s = WeightSync::open(o);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("proof of the job secret"), std::string::npos);
}

}  // namespace
}  // namespace tlt::rl
