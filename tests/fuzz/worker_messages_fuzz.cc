// Fuzz target: any JSON text as a message between the RL driver and a worker goes through every
// decoder of runtime/rl/messages.h (the driver's of a worker's replies, the worker's of the
// driver's messages) without a crash, a throw, a leak or a hang, and what a decoder accepts
// keeps its promises: ids among the worker's requests and not answered twice, token ids inside
// the vocabulary, lengths inside the limits, files where they belong; and what it accepts, its
// encoder writes back as a message the decoder accepts again, unchanged.
// Input: JSON text (parsed as the channel parses a line: api::parse_json_bounded).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "api/json_bounded.h"
#include "runtime/rl/messages.h"

namespace {

using nlohmann::json;
using namespace tlt::rl;
using tlt::StatusOr;

[[noreturn]] void fail(const char* what, const json& m) {
  std::fprintf(stderr, "%s\nmessage:\n%s\n", what,
               m.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  std::abort();
}

// `decoded` (what `decode` accepted from m) encoded, decoded again and encoded again: the same.
template <class T, class Decode>
void check_round_trip(const T& decoded, Decode decode, const json& m) {
  json once = to_json(decoded);
  StatusOr<T> again = decode(once);
  if (!again.ok()) fail("an accepted message re-encoded is refused", m);
  if (to_json(*again) != once) fail("an accepted message re-encoded changed", m);
}

// Worker 1 of step 3, sent requests 4..7 (5 already streamed), vocabulary 100, 16 tokens.
StepReplyContext reply_context() {
  StepReplyContext c;
  c.step = 3, c.worker = 1, c.vocab = 100, c.max_tokens = 16;
  c.assigned = {4, 5, 6, 7};
  c.answered.assign(8, false);
  c.answered[5] = true;
  c.run_dir = "/run";
  return c;
}

WorkerContext worker_context() {
  WorkerContext c;
  c.dir = "/w", c.vocab = 50, c.max_seq = 32;
  return c;
}

void check_response(const Response& r, const StepReplyContext& c, const json& m) {
  if (!std::binary_search(c.assigned.begin(), c.assigned.end(), r.id)) fail("foreign id", m);
  if (int64_t(r.tokens.size()) > c.max_tokens) fail("response too long", m);
  for (int64_t t : r.tokens)
    if (t < 0 || t >= c.vocab) fail("token outside the vocabulary", m);
}

void check_replies(const json& m) {
  const StepReplyContext c = reply_context();
  if (StatusOr<Completed> r = decode_completed(m, c); r.ok()) {
    check_response(r->response, c, m);
    if (c.answered[size_t(r->response.id)]) fail("an answered id accepted again", m);
    check_round_trip(
        *r, [&](const json& j) { return decode_completed(j, c); }, m);
  }
  if (StatusOr<Generated> g = decode_generated(m, c); g.ok()) {
    std::set<int64_t> ids;
    for (const Response& r : g->responses) check_response(r, c, m), ids.insert(r.id);
    if (ids.size() != c.assigned.size() || g->responses.size() != c.assigned.size())
      fail("not every request answered exactly once", m);
    if (g->stats.draft_vocab > c.vocab) fail("draft vocabulary beyond the vocabulary", m);
    for (const BanditStep& s : g->stats.bandit)
      if (s.batch < 1 || s.arm < 0 || s.context < 0 || !(s.seconds > 0)) fail("bandit step", m);
    check_round_trip(
        *g, [&](const json& j) { return decode_generated(j, c); }, m);
  }
  if (StatusOr<Trained> t = decode_trained(m, c); t.ok()) {
    if (t->steps > 0 && t->drafter != "/run/drafter-w1.ckpt") fail("foreign drafter file", m);
    check_round_trip(
        *t, [&](const json& j) { return decode_trained(j, c); }, m);
  }
  if (StatusOr<WeightsAck> a = decode_weights_ack(m, 1, 4, 2); a.ok()) {
    if (a->policy_version > 4 || a->drafter_version > 2 || a->refused < 0 || a->refused > 2)
      fail("acknowledgement out of range", m);
    check_round_trip(
        *a, [](const json& j) { return decode_weights_ack(j, 1, 4, 2); }, m);
  }
}

bool under(const std::string& path, const std::string& dir) {
  return path.rfind(dir + "/", 0) == 0 && path.find("/../") == std::string::npos &&
         path.find("/./") == std::string::npos;
}

void check_driver_messages(const json& m) {
  const WorkerContext c = worker_context();
  if (StatusOr<GenerateMessage> g = decode_generate(m, c); g.ok()) {
    if (!under(g->policy, c.dir)) fail("policy outside the worker's directory", m);
    std::set<int64_t> ids;
    for (const GenerateRequest& q : g->requests) {
      if (!ids.insert(q.id).second) fail("repeated request id", m);
      if (q.prompt.empty() || int64_t(q.prompt.size()) + q.max_new > c.max_seq)
        fail("request does not fit", m);
      for (int64_t t : q.prompt)
        if (t < 0 || t >= c.vocab) fail("prompt token outside the vocabulary", m);
      if (!(q.top_p > 0 && q.top_p <= 1) || !(q.temperature >= 0)) fail("sampling", m);
    }
    check_round_trip(
        *g, [&](const json& j) { return decode_generate(j, c); }, m);
  }
  if (StatusOr<TrainMessage> t = decode_train(m, c); t.ok()) {
    for (const std::string& b : t->buffers)
      if (!under(b, c.dir + "/buffer")) fail("buffer outside the buffer directory", m);
    check_round_trip(
        *t, [&](const json& j) { return decode_train(j, c); }, m);
  }
  if (StatusOr<WeightsMessage> w = decode_weights(m); w.ok())
    check_round_trip(
        *w, [](const json& j) { return decode_weights(j); }, m);
  if (StatusOr<StopMessage> st = decode_stop(m); st.ok()) {
    if (!(st->sent_at == -1 || st->sent_at >= 0)) fail("stop time out of range", m);
    check_round_trip(
        *st, [](const json& j) { return decode_stop(j); }, m);
  }
  if (StatusOr<WeightSyncInvite> g = decode_weight_sync(m, c); g.ok()) {
    if (g->rank < 1 || g->rank >= g->world) fail("rank outside the world", m);
    if (g->store.empty() == (g->port == 0)) fail("neither or both of port and store", m);
    check_round_trip(
        *g, [&](const json& j) { return decode_weight_sync(j, c); }, m);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tlt::StatusOr<json> m = tlt::api::parse_json_bounded(text, "the fuzz input");
  if (!m.ok()) return 0;
  check_replies(*m);
  check_driver_messages(*m);
  return 0;
}
