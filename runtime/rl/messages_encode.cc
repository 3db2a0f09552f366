// The encoders of runtime/rl/messages.h: each message as its sender writes it, the fields its
// decoder reads (messages.cc) under the same names.
#include "runtime/rl/messages.h"

namespace tlt::rl {
using nlohmann::json;

namespace {

json to_json(const Response& r, bool with_stopped) {
  json c = {{"id", r.id}, {"tokens", r.tokens}};
  if (with_stopped) c["stopped"] = r.stopped;
  return c;
}

json to_json(const GeneratedStats& s) {
  json st = {{"tokens", s.tokens},           {"plain_steps", s.plain_steps},
             {"spec_steps", s.spec_steps},   {"request_spec_steps", s.request_spec_steps},
             {"accepted", s.accepted},       {"arms", s.arms},
             {"copied", s.copied},           {"phases", s.phases},
             {"draft_vocab", s.draft_vocab}, {"bandit_absorbed", s.bandit_absorbed}};
  if (s.has_bandit) {
    json kept = json::array();
    for (const BanditStep& b : s.bandit) kept.push_back(to_json(b));
    st["bandit"] = std::move(kept);
  }
  return st;
}

json to_json(const GenerateRequest& q) {
  return {{"id", q.id},
          {"prompt", q.prompt},
          {"max_new", q.max_new},
          {"stop", q.stop},
          {"more_stop", q.more_stop},
          {"seed", q.seed},
          {"temperature", q.temperature},
          {"top_p", q.top_p}};
}

}  // namespace

json to_json(const BanditStep& s) {
  return json::array({s.batch, s.arm, s.context, s.tokens, s.seconds, s.explore_cost});
}

// ---- worker -> driver --------------------------------------------------------------------------

json to_json(const Completed& m) {
  json out = to_json(m.response, /*with_stopped=*/false);
  out["op"] = "completed";
  out["step"] = m.step;
  out["policy_version"] = m.policy_version;
  return out;
}

json to_json(const Generated& m) {
  json comps = json::array();
  for (const Response& r : m.responses) comps.push_back(to_json(r, /*with_stopped=*/true));
  json out = {{"op", "generated"},
              {"step", m.step},
              {"worker", m.worker},
              {"policy_version", m.policy_version},
              {"drafter_version", m.drafter_version},
              {"completions", std::move(comps)},
              {"stats", to_json(m.stats)},
              {"seconds", m.seconds}};
  if (!m.buffer.empty()) out["buffer"] = m.buffer;
  if (m.device_busy >= 0) out["device_busy"] = m.device_busy;
  return out;
}

json to_json(const Trained& m) {
  json out = {{"op", "trained"},          {"step", m.step},
              {"worker", m.worker},       {"steps", m.steps},
              {"drafter", m.drafter},     {"loss_first", m.loss_first},
              {"loss_last", m.loss_last}, {"stop_latency_s", m.stop_latency_s},
              {"seconds", m.seconds}};
  if (m.device_busy >= 0) out["device_busy"] = m.device_busy;
  return out;
}

json to_json(const WeightsAck& m) {
  return {{"op", "weights"},
          {"worker", m.worker},
          {"policy_version", m.policy_version},
          {"drafter_version", m.drafter_version},
          {"refused", m.refused},
          {"error", m.error}};
}

// ---- driver -> worker --------------------------------------------------------------------------

json to_json(const GenerateMessage& m) {
  json reqs = json::array();
  for (const GenerateRequest& q : m.requests) reqs.push_back(to_json(q));
  json out = {{"op", "generate"},
              {"step", m.step},
              {"policy", m.policy},
              {"policy_version", m.policy_version},
              {"speculative", m.speculative},
              {"collect_hidden", m.collect_hidden},
              {"stream_completions", m.stream_completions},
              {"requests", std::move(reqs)}};
  if (m.drafter_version >= 0) {
    out["drafter"] = m.drafter;
    out["drafter_version"] = m.drafter_version;
  }
  if (m.pool_bandit) {
    json peers = json::array();
    for (const BanditStep& b : m.bandit_peers) peers.push_back(to_json(b));
    out["pool_bandit"] = true;
    out["bandit_peers"] = std::move(peers);
  }
  return out;
}

json to_json(const TrainMessage& m) {
  return {{"op", "train"}, {"step", m.step}, {"buffers", m.buffers}};
}

json to_json(const WeightsMessage& m) {
  return {{"op", "weights"},
          {"policy_version", m.policy_version},
          {"drafter_version", m.drafter_version}};
}

json to_json(const StopMessage& m) {
  json out = {{"op", "stop"}};
  if (m.sent_at >= 0) out["sent_at"] = m.sent_at;
  return out;
}

json to_json(const WeightSyncInvite& g) {
  json m = {{"generation", g.generation},
            {"nonce", g.nonce},
            {"rank", g.rank},
            {"world", g.world},
            {"rendezvous_timeout_s", g.rendezvous_timeout_s},
            {"timeout_s", g.timeout_s},
            {"bucket_bytes", g.bucket_bytes},
            {"cuda", g.cuda}};
  if (g.store.empty())
    m["port"] = g.port;
  else
    m["store"] = g.store;
  return m;
}

}  // namespace tlt::rl
