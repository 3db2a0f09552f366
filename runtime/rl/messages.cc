#include "runtime/rl/messages.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/rl/run_dir.h"

namespace tlt::rl {
using nlohmann::json;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Reads the fields of one JSON object, checking each against its expected range. The first
// failure is kept (later reads return defaults and change nothing); status() says it.
class Reader {
 public:
  Reader(const json& m, std::string what) : m_(m), what_(std::move(what)) {
    if (!m_.is_object()) fail("", "is " + describe(m_) + "; expected a JSON object");
  }

  Status status() const { return error_.empty() ? Status::Ok() : Status::InvalidArgument(error_); }
  bool ok() const { return error_.empty(); }
  // Records the first failure: `field` (a path such as "completions[3].id") `says`.
  void fail(const std::string& field, const std::string& says) {
    if (error_.empty()) error_ = what_ + ": " + (field.empty() ? "" : field + " ") + says;
  }

  // The field `key`, or null when it is absent (or the message is not an object).
  const json* find(const char* key) const {
    if (!m_.is_object()) return nullptr;
    auto it = m_.find(key);
    return it == m_.end() ? nullptr : &*it;
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi) {
    return integer_at(find(key), key, lo, hi);
  }
  // An optional field: `fallback` when absent.
  int64_t integer_or(const char* key, int64_t lo, int64_t hi, int64_t fallback) {
    return find(key) ? integer(key, lo, hi) : fallback;
  }
  double number(const char* key, double lo, double hi) { return number_at(find(key), key, lo, hi); }
  double number_or(const char* key, double lo, double hi, double fallback) {
    return find(key) ? number(key, lo, hi) : fallback;
  }
  bool boolean_or(const char* key, bool fallback) {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(key, "is " + describe(*v) + "; expected true or false");
    return ok() ? v->get<bool>() : fallback;
  }
  std::string text(const char* key, size_t max_chars) {
    const json* v = find(key);
    if (!v || !v->is_string()) {
      fail(key, v ? "is " + describe(*v) + "; expected a string" : "is missing");
      return "";
    }
    const std::string& s = v->get_ref<const std::string&>();
    if (s.size() > max_chars)
      fail(key,
           "has " + std::to_string(s.size()) + " characters; at most " + std::to_string(max_chars));
    return ok() ? s : "";
  }
  std::string text_or(const char* key, size_t max_chars, const std::string& fallback) {
    return find(key) ? text(key, max_chars) : fallback;
  }
  // An array of at most max_items, or null (the failure recorded).
  const json* array(const char* key, int64_t max_items) {
    const json* v = find(key);
    if (!v || !v->is_array()) {
      fail(key, v ? "is " + describe(*v) + "; expected an array" : "is missing");
      return nullptr;
    }
    if (int64_t(v->size()) > max_items) {
      fail(key,
           "has " + std::to_string(v->size()) + " items; at most " + std::to_string(max_items));
      return nullptr;
    }
    return v;
  }
  const json* object(const char* key) {
    const json* v = find(key);
    if (!v || !v->is_object()) {
      fail(key, v ? "is " + describe(*v) + "; expected an object" : "is missing");
      return nullptr;
    }
    return v;
  }

  // `v` (named `field`) as an integer in [lo, hi].
  int64_t integer_at(const json* v, const std::string& field, int64_t lo, int64_t hi) {
    if (!v) {
      fail(field, "is missing");
      return lo;
    }
    bool integral = v->is_number_integer() &&
                    (!v->is_number_unsigned() || v->get<uint64_t>() <= uint64_t(kInt64Max));
    int64_t x = integral ? v->get<int64_t>() : 0;
    if (!integral || x < lo || x > hi) {
      fail(field, "is " + describe(*v) + "; expected an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
      return lo;
    }
    return x;
  }
  double number_at(const json* v, const std::string& field, double lo, double hi) {
    if (!v) {
      fail(field, "is missing");
      return lo;
    }
    double x = v->is_number() ? v->get<double>() : std::nan("");
    if (!std::isfinite(x) || x < lo || x > hi) {
      fail(field, "is " + describe(*v) + "; expected a finite number in [" + std::to_string(lo) +
                      ", " + std::to_string(hi) + "]");
      return lo;
    }
    return x;
  }
  // Token ids in [0, vocab), at most max_items of them.
  std::vector<int64_t> tokens_at(const json* v, const std::string& field, int64_t vocab,
                                 int64_t max_items) {
    std::vector<int64_t> out;
    if (!v || !v->is_array()) {
      fail(field, v ? "is " + describe(*v) + "; expected an array of token ids" : "is missing");
      return out;
    }
    if (int64_t(v->size()) > max_items) {
      fail(field,
           "has " + std::to_string(v->size()) + " tokens; at most " + std::to_string(max_items));
      return out;
    }
    out.reserve(v->size());
    for (size_t i = 0; i < v->size() && ok(); ++i)
      out.push_back(integer_at(&(*v)[i], field + "[" + std::to_string(i) + "]", 0, vocab - 1));
    return out;
  }

  // A short description of a value for an error: its JSON text, cut.
  static std::string describe(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    return s.size() > 40 ? s.substr(0, 40) + "..." : s;
  }

 private:
  const json& m_;
  std::string what_;
  std::string error_;
};

// "op" is `op`.
void expect_op(Reader& r, const char* op) {
  const json* v = r.find("op");
  if (!v || !v->is_string() || v->get_ref<const std::string&>() != op)
    r.fail("op", std::string(v ? "is " + Reader::describe(*v) : "is missing") + "; expected \"" +
                     op + "\"");
}

// `path` lies under `dir` (`dir` + "/" + a relative path without "." or ".." components).
bool under(const std::string& path, const std::string& dir) {
  if (dir.empty() || path.size() <= dir.size() + 1 || path.compare(0, dir.size(), dir) != 0 ||
      path[dir.size()] != '/')
    return false;
  size_t at = dir.size() + 1;
  while (at <= path.size()) {
    size_t end = std::min(path.find('/', at), path.size());
    std::string part = path.substr(at, end - at);
    if (part.empty() || part == "." || part == "..") return false;
    at = end + 1;
  }
  return true;
}

void expect_under(Reader& r, const char* field, const std::string& path, const std::string& dir) {
  if (r.ok() && !under(path, dir))
    r.fail(field, "is " + path.substr(0, 200) + "; expected a file under " + dir + "/");
}

std::string who(const StepReplyContext& c, const char* op) {
  return "worker " + std::to_string(c.worker) + "'s " + op + " (step " + std::to_string(c.step) +
         ")";
}

// The step, worker (when `with_worker`) and policy version of a reply.
void expect_step(Reader& r, const StepReplyContext& c, bool with_worker, bool with_version) {
  r.integer("step", c.step, c.step);
  if (with_worker) r.integer("worker", c.worker, c.worker);
  if (with_version) r.integer("policy_version", c.step - 1, c.step - 1);
}

bool assigned(const StepReplyContext& c, int64_t id) {
  return std::binary_search(c.assigned.begin(), c.assigned.end(), id);
}

// Completion `v` of a reply (field `at`): its id assigned, its tokens in range.
Response read_response(Reader& r, const json& v, const std::string& at, const StepReplyContext& c) {
  Response out;
  const std::string p = at.empty() ? "" : at + ".";
  if (!v.is_object()) {
    r.fail(at, "is " + Reader::describe(v) + "; expected {\"id\", \"tokens\"}");
    return out;
  }
  auto field = [&](const char* k) { return v.contains(k) ? &v.at(k) : nullptr; };
  out.id = r.integer_at(field("id"), p + "id", 0, kInt64Max);
  if (r.ok() && !assigned(c, out.id))
    r.fail(p + "id", "is " + std::to_string(out.id) + "; expected one of the " +
                         std::to_string(c.assigned.size()) + " request ids it was sent this step");
  out.tokens = r.tokens_at(field("tokens"), p + "tokens", c.vocab, c.max_tokens);
  const json* stopped = field("stopped");
  if (stopped && !stopped->is_boolean()) r.fail(p + "stopped", "is not true or false");
  out.stopped = r.ok() && stopped && stopped->get<bool>();
  return out;
}

// Names (at most kMaxStatNames, each at most kMaxNameChars) with values in [0, hi].
template <class T>
std::map<std::string, T> read_named(Reader& r, const json& stats, const char* key, T hi) {
  std::map<std::string, T> out;
  if (!stats.contains(key)) return out;
  const json& v = stats.at(key);
  const std::string at = std::string("stats.") + key;
  if (!v.is_object() || int64_t(v.size()) > kMaxStatNames) {
    r.fail(at, "is " + Reader::describe(v) + "; expected an object of at most " +
                   std::to_string(kMaxStatNames) + " names");
    return out;
  }
  for (const auto& [name, x] : v.items()) {
    if (name.empty() || name.size() > kMaxNameChars) {
      r.fail(at, "names \"" + name.substr(0, 80) + "\"; expected 1 to " +
                     std::to_string(kMaxNameChars) + " characters");
      break;
    }
    if constexpr (std::is_same_v<T, int64_t>)
      out[name] = r.integer_at(&x, at + "." + name, 0, hi);
    else
      out[name] = r.number_at(&x, at + "." + name, 0, hi);
  }
  return out;
}

GeneratedStats read_stats(Reader& r, const json& st, const StepReplyContext& c) {
  GeneratedStats s;
  Reader f(st, "stats");
  constexpr int64_t kCount = int64_t(1) << 50;
  s.tokens = f.integer("tokens", 0, kCount);
  s.plain_steps = f.integer_or("plain_steps", 0, kCount, 0);
  s.spec_steps = f.integer_or("spec_steps", 0, kCount, 0);
  s.request_spec_steps = f.integer("request_spec_steps", 0, kCount);
  s.accepted = f.integer("accepted", 0, kCount);
  s.copied = f.integer_or("copied", 0, kCount, 0);
  s.bandit_absorbed = f.integer_or("bandit_absorbed", 0, kCount, 0);
  s.draft_vocab = f.integer_or("draft_vocab", 0, c.vocab, 0);
  if (!f.ok()) {
    r.fail("", f.status().message());
    return s;
  }
  s.arms = read_named<int64_t>(r, st, "arms", kCount);
  s.phases = read_named<double>(r, st, "phases", 1e9);
  if (r.ok() && st.contains("bandit")) {
    StatusOr<std::vector<BanditStep>> b = decode_bandit_steps(st.at("bandit"), "stats.bandit");
    if (!b.ok()) {
      r.fail("", b.status().message());
      return s;
    }
    s.has_bandit = true;
    s.bandit = std::move(*b);
  }
  return s;
}

}  // namespace

StatusOr<std::vector<BanditStep>> decode_bandit_steps(const json& list, const std::string& where) {
  if (!list.is_array() || int64_t(list.size()) > kMaxBanditSteps)
    return Status::InvalidArgument(where + ": expected an array of at most " +
                                   std::to_string(kMaxBanditSteps) + " bandit steps");
  std::vector<BanditStep> out;
  out.reserve(list.size());
  json wrapper = json::object();
  Reader r(wrapper, where);
  constexpr double kHuge = 1e15;
  for (size_t i = 0; i < list.size() && r.ok(); ++i) {
    const json& o = list[i];
    const std::string at = "[" + std::to_string(i) + "]";
    if (!o.is_array() || o.size() != 6) {
      r.fail(at, "is " + Reader::describe(o) +
                     "; expected [batch, arm, context, tokens, seconds, explore cost]");
      break;
    }
    BanditStep s;
    s.batch = r.integer_at(&o[0], at + " batch", 1, kMaxMessageRequests);
    s.arm = int32_t(r.integer_at(&o[1], at + " arm", 0, std::numeric_limits<int32_t>::max()));
    s.context =
        int32_t(r.integer_at(&o[2], at + " context", 0, std::numeric_limits<int32_t>::max()));
    s.tokens = r.number_at(&o[3], at + " tokens", 0, kHuge);
    s.seconds = r.number_at(&o[4], at + " seconds", 0, kHuge);
    if (r.ok() && !(s.seconds > 0)) r.fail(at + " seconds", "is 0; expected a positive time");
    s.explore_cost = r.number_at(&o[5], at + " explore cost", 0, kHuge);
    out.push_back(s);
  }
  if (!r.ok()) return r.status();
  return out;
}

StatusOr<Completed> decode_completed(const json& m, const StepReplyContext& c) {
  Reader r(m, who(c, "completed"));
  expect_op(r, "completed");
  expect_step(r, c, /*with_worker=*/false, /*with_version=*/true);
  if (!r.ok()) return r.status();
  Completed out;
  out.step = c.step, out.policy_version = c.step - 1;
  out.response = read_response(r, m, "", c);
  const int64_t id = out.response.id;
  if (r.ok() && size_t(id) < c.answered.size() && c.answered[size_t(id)])
    r.fail("id", std::to_string(id) + " was already answered by this worker");
  if (!r.ok()) return r.status();
  return out;
}

StatusOr<Generated> decode_generated(const json& m, const StepReplyContext& c) {
  Reader r(m, who(c, "generated"));
  expect_op(r, "generated");
  expect_step(r, c, /*with_worker=*/true, /*with_version=*/true);
  Generated out;
  out.step = c.step, out.worker = c.worker, out.policy_version = c.step - 1;
  out.drafter_version = r.integer_or("drafter_version", -1, kInt64Max, -1);
  const json* comps = r.array("completions", int64_t(c.assigned.size()));
  const json* stats = r.object("stats");
  std::vector<bool> seen(c.assigned.size(), false);
  for (size_t i = 0; comps && i < comps->size() && r.ok(); ++i) {
    const std::string at = "completions[" + std::to_string(i) + "]";
    Response resp = read_response(r, (*comps)[i], at, c);
    if (!r.ok()) break;
    size_t k = size_t(std::lower_bound(c.assigned.begin(), c.assigned.end(), resp.id) -
                      c.assigned.begin());
    if (seen[k]) r.fail(at + ".id", std::to_string(resp.id) + " is answered twice");
    seen[k] = true;
    out.responses.push_back(std::move(resp));
  }
  if (r.ok() && out.responses.size() != c.assigned.size())
    r.fail("completions", "answer " + std::to_string(out.responses.size()) + " of the " +
                              std::to_string(c.assigned.size()) + " requests it was sent");
  if (r.ok()) out.stats = read_stats(r, *stats, c);
  if (r.ok() && r.find("buffer")) {
    out.buffer = r.text("buffer", kMaxTextChars);
    std::string expected = buffer_path(c.run_dir, c.step, c.worker);
    if (r.ok() && out.buffer != expected)
      r.fail("buffer", "is " + out.buffer.substr(0, 200) + "; expected " + expected);
  }
  out.seconds = r.number_or("seconds", 0, 1e9, 0);
  out.device_busy = r.number_or("device_busy", 0, 1, -1);
  if (!r.ok()) return r.status();
  return out;
}

StatusOr<Trained> decode_trained(const json& m, const StepReplyContext& c) {
  Reader r(m, who(c, "trained"));
  expect_op(r, "trained");
  expect_step(r, c, /*with_worker=*/true, /*with_version=*/false);
  Trained out;
  out.step = c.step, out.worker = c.worker;
  out.steps = r.integer("steps", 0, int64_t(1) << 40);
  out.loss_first = r.number("loss_first", -1e30, 1e30);
  out.loss_last = r.number("loss_last", -1e30, 1e30);
  out.stop_latency_s = r.number("stop_latency_s", -1e9, 1e9);
  out.seconds = r.number_or("seconds", 0, 1e9, 0);
  out.device_busy = r.number_or("device_busy", 0, 1, -1);
  if (r.ok() && out.steps > 0) {
    out.drafter = r.text("drafter", kMaxTextChars);
    std::string expected = worker_drafter_path(c.run_dir, c.worker);
    if (r.ok() && out.drafter != expected)
      r.fail("drafter", "is " + out.drafter.substr(0, 200) + "; expected " + expected);
  }
  if (!r.ok()) return r.status();
  return out;
}

StatusOr<WeightsAck> decode_weights_ack(const json& m, int worker, int64_t policy_version,
                                        int64_t drafter_version) {
  Reader r(m, "worker " + std::to_string(worker) + "'s weights");
  expect_op(r, "weights");
  WeightsAck out;
  out.worker = int(r.integer("worker", worker, worker));
  out.policy_version = r.integer("policy_version", -1, policy_version);
  out.drafter_version = r.integer("drafter_version", -1, std::max<int64_t>(-1, drafter_version));
  out.refused = r.integer("refused", 0, 2);
  out.error = r.text_or("error", kMaxTextChars, "");
  if (!r.ok()) return r.status();
  return out;
}

// ---- driver -> worker --------------------------------------------------------------------------

namespace {

GenerateRequest read_request(Reader& r, const json& v, const std::string& at,
                             const WorkerContext& c) {
  GenerateRequest q;
  if (!v.is_object()) {
    r.fail(at, "is " + Reader::describe(v) + "; expected a request object");
    return q;
  }
  auto field = [&](const char* k) { return v.contains(k) ? &v.at(k) : nullptr; };
  q.id = r.integer_at(field("id"), at + ".id", 0, kInt64Max);
  q.prompt = r.tokens_at(field("prompt"), at + ".prompt", c.vocab, c.max_seq - 1);
  if (r.ok() && q.prompt.empty()) r.fail(at + ".prompt", "is empty");
  int64_t room = c.max_seq - int64_t(q.prompt.size());
  q.max_new =
      int32_t(r.integer_at(field("max_new"), at + ".max_new", 1, std::max<int64_t>(1, room)));
  q.stop = r.integer_at(field("stop"), at + ".stop", 0, c.vocab - 1);
  if (const json* more = field("more_stop"))
    q.more_stop = r.tokens_at(more, at + ".more_stop", c.vocab, 64);
  const json* seed = field("seed");
  if (r.ok() && (!seed || !seed->is_number_integer() ||
                 (!seed->is_number_unsigned() && seed->get<int64_t>() < 0)))
    r.fail(at + ".seed", "is not an integer in [0, 2^64)");
  if (r.ok()) q.seed = seed->get<uint64_t>();
  q.temperature = r.number_at(field("temperature"), at + ".temperature", 0, 1e6);
  q.top_p = r.number_at(field("top_p"), at + ".top_p", 0, 1);
  if (r.ok() && !(q.top_p > 0)) r.fail(at + ".top_p", "is 0; expected (0, 1]");
  return q;
}

}  // namespace

StatusOr<GenerateMessage> decode_generate(const json& m, const WorkerContext& c) {
  Reader r(m, "the driver's generate");
  expect_op(r, "generate");
  GenerateMessage g;
  g.step = r.integer("step", 1, kInt64Max);
  g.policy_version = r.integer("policy_version", 0, kInt64Max);
  g.policy = r.text("policy", kMaxTextChars);
  expect_under(r, "policy", g.policy, c.dir);
  g.drafter_version = r.integer_or("drafter_version", -1, kInt64Max, -1);
  if (g.drafter_version >= 0) {
    g.drafter = r.text("drafter", kMaxTextChars);
    expect_under(r, "drafter", g.drafter, c.dir);
  }
  g.speculative = r.boolean_or("speculative", false);
  g.collect_hidden = r.boolean_or("collect_hidden", false);
  g.stream_completions = r.boolean_or("stream_completions", false);
  g.pool_bandit = r.boolean_or("pool_bandit", false);
  const json* reqs = r.array("requests", kMaxMessageRequests);
  for (size_t i = 0; reqs && i < reqs->size() && r.ok(); ++i)
    g.requests.push_back(read_request(r, (*reqs)[i], "requests[" + std::to_string(i) + "]", c));
  std::vector<int64_t> ids;
  for (const GenerateRequest& q : g.requests) ids.push_back(q.id);
  std::sort(ids.begin(), ids.end());
  if (r.ok() && std::adjacent_find(ids.begin(), ids.end()) != ids.end())
    r.fail("requests",
           "repeat request id " + std::to_string(*std::adjacent_find(ids.begin(), ids.end())));
  if (r.ok() && r.find("bandit_peers")) {
    StatusOr<std::vector<BanditStep>> peers =
        decode_bandit_steps(*r.find("bandit_peers"), "bandit_peers");
    if (!peers.ok())
      r.fail("", peers.status().message());
    else
      g.bandit_peers = std::move(*peers);
  }
  if (!r.ok()) return r.status();
  return g;
}

StatusOr<TrainMessage> decode_train(const json& m, const WorkerContext& c) {
  Reader r(m, "the driver's train");
  expect_op(r, "train");
  TrainMessage t;
  t.step = r.integer("step", 1, kInt64Max);
  const json* files = r.array("buffers", 1 << 16);
  for (size_t i = 0; files && i < files->size() && r.ok(); ++i) {
    const json& f = (*files)[i];
    const std::string at = "buffers[" + std::to_string(i) + "]";
    if (!f.is_string()) {
      r.fail(at, "is " + Reader::describe(f) + "; expected a path");
      break;
    }
    t.buffers.push_back(f.get<std::string>());
    expect_under(r, at.c_str(), t.buffers.back(), buffer_dir(c.dir));
  }
  if (!r.ok()) return r.status();
  return t;
}

StatusOr<WeightsMessage> decode_weights(const json& m) {
  Reader r(m, "the driver's weights");
  expect_op(r, "weights");
  WeightsMessage w;
  w.policy_version = r.integer("policy_version", 0, kInt64Max);
  w.drafter_version = r.integer_or("drafter_version", -1, kInt64Max, -1);
  if (!r.ok()) return r.status();
  return w;
}

StatusOr<StopMessage> decode_stop(const json& m) {
  Reader r(m, "the driver's stop");
  expect_op(r, "stop");
  StopMessage s;
  s.sent_at = r.find("sent_at") ? r.number("sent_at", 0, 1e15) : -1;
  if (!r.ok()) return r.status();
  return s;
}

StatusOr<WeightSyncInvite> decode_weight_sync(const json& m, const WorkerContext& c) {
  Reader r(m, "the driver's weight_sync");
  WeightSyncInvite g;
  g.generation = r.integer("generation", 1, kInt64Max);
  g.nonce = r.text("nonce", 32);
  if (r.ok() &&
      (g.nonce.size() != 32 || g.nonce.find_first_not_of("0123456789abcdef") != std::string::npos))
    r.fail("nonce", "is not 32 lowercase hex digits");
  g.world = int(r.integer("world", 2, 65536));
  g.rank = int(r.integer("rank", 1, g.world - 1));
  if (r.find("store")) {
    g.store = r.text("store", kMaxTextChars);
    expect_under(r, "store", g.store, weight_sync_dir(c.dir));
    if (r.ok() && r.find("port"))
      r.fail("port", "is given with a store file; expected one of them");
  } else {
    g.port = int(r.integer("port", 1, 65535));
  }
  g.rendezvous_timeout_s =
      int(r.integer_or("rendezvous_timeout_s", 1, 86400, g.rendezvous_timeout_s));
  g.timeout_s = int(r.integer_or("timeout_s", 1, 86400, g.timeout_s));
  g.bucket_bytes = r.integer_or("bucket_bytes", 8, int64_t(1) << 30, g.bucket_bytes);
  g.cuda = r.boolean_or("cuda", false);
  if (!r.ok()) return r.status();
  return g;
}

}  // namespace tlt::rl
