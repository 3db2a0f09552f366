// The checked decoding of the driver <-> worker messages (runtime/rl/messages.h): every field a
// receiver uses is refused when it is out of range, of the wrong type, missing, repeated or names
// a file it must not, with an error that names the field; sound messages decode to their values.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "runtime/rl/messages.h"

namespace tlt::rl {
namespace {

using nlohmann::json;

// Worker 1 of step 3 was sent requests 4..7, over a vocabulary of 100, responses up to 16 tokens.
StepReplyContext step_context() {
  StepReplyContext c;
  c.step = 3, c.worker = 1, c.vocab = 100, c.max_tokens = 16;
  c.assigned = {4, 5, 6, 7};
  c.answered.assign(8, false);
  c.run_dir = "/run";
  return c;
}

json completion(json id, json tokens = json::array({1, 2, 3})) {
  return {{"id", std::move(id)}, {"tokens", std::move(tokens)}, {"stopped", true}};
}

json generated(json completions) {
  return {{"op", "generated"},
          {"step", 3},
          {"worker", 1},
          {"policy_version", 2},
          {"drafter_version", 0},
          {"completions", std::move(completions)},
          {"stats",
           {{"tokens", 12},
            {"request_spec_steps", 2},
            {"accepted", 3},
            {"arms", {{"ngram", 4}}},
            {"phases", {{"verify", 0.5}}},
            {"bandit", json::array({json::array({4, 1, 0, 3.0, 0.01, 0.0})})}}},
          {"seconds", 0.25}};
}

json all_four() {
  return json::array({completion(4), completion(5), completion(6), completion(7)});
}

// `st` is a refusal (InvalidArgument) whose message names `field`.
void expect_refused(const Status& st, const std::string& field) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
}

TEST(RlMessages, Generated_SoundReplyDecodesEveryField) {
  StatusOr<Generated> g = decode_generated(generated(all_four()), step_context());
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->responses.size(), 4u);
  EXPECT_EQ(g->responses[2].id, 6);
  EXPECT_EQ(g->responses[2].tokens, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(g->responses[2].stopped);
  EXPECT_EQ(g->stats.tokens, 12);
  EXPECT_EQ(g->stats.arms.at("ngram"), 4);
  EXPECT_DOUBLE_EQ(g->stats.phases.at("verify"), 0.5);
  ASSERT_TRUE(g->stats.has_bandit);
  ASSERT_EQ(g->stats.bandit.size(), 1u);
  EXPECT_EQ(g->stats.bandit[0].batch, 4);
  EXPECT_EQ(to_json(g->stats.bandit[0]), json::array({4, 1, 0, 3.0, 0.01, 0.0}));
}

// The crash of the issue: a completion id far outside the step's requests.
TEST(RlMessages, Generated_IdOutsideTheWorkersRequestsIsRefused) {
  for (json id : {json(100000), json(int64_t(1) << 40), json(-1), json(0), json(8),
                  json(uint64_t(1) << 63)}) {
    json comps = all_four();
    comps[0] = completion(id);
    expect_refused(decode_generated(generated(comps), step_context()).status(),
                   "completions[0].id");
  }
}

TEST(RlMessages, Generated_RepeatedOrMissingIdIsRefused) {
  json twice = all_four();
  twice[3] = completion(4);
  expect_refused(decode_generated(generated(twice), step_context()).status(), "answered twice");
  json three = all_four();
  three.erase(1);
  expect_refused(decode_generated(generated(three), step_context()).status(),
                 "answer 3 of the 4 requests");
  json five = all_four();
  five.push_back(completion(5));
  expect_refused(decode_generated(generated(five), step_context()).status(), "completions");
}

TEST(RlMessages, Generated_WrongTypesAndMissingFieldsAreRefused) {
  json comps = all_four();
  comps[1] = completion("5");
  expect_refused(decode_generated(generated(comps), step_context()).status(), "completions[1].id");
  comps = all_four();
  comps[1] = completion(5.5);
  expect_refused(decode_generated(generated(comps), step_context()).status(), "completions[1].id");
  comps = all_four();
  comps[2] = completion(6, "abc");
  expect_refused(decode_generated(generated(comps), step_context()).status(),
                 "completions[2].tokens");
  comps = all_four();
  comps[2] = json::array({6});
  expect_refused(decode_generated(generated(comps), step_context()).status(), "completions[2]");
  json m = generated(all_four());
  m.erase("stats");
  expect_refused(decode_generated(m, step_context()).status(), "stats is missing");
  m = generated(all_four());
  m["completions"] = "all of them";
  expect_refused(decode_generated(m, step_context()).status(), "completions");
  m = generated(all_four());
  m["stats"]["tokens"] = -5;
  expect_refused(decode_generated(m, step_context()).status(), "tokens");
  m = generated(all_four());
  m["stats"]["phases"]["verify"] = "slow";
  expect_refused(decode_generated(m, step_context()).status(), "stats.phases.verify");
  m = generated(all_four());
  for (int i = 0; i < 100; ++i) m["stats"]["arms"]["arm" + std::to_string(i)] = 1;
  expect_refused(decode_generated(m, step_context()).status(), "stats.arms");
  m = generated(all_four());
  m["stats"]["bandit"] = json::array({json::array({4, 1, 0, 3.0, 0.0, 0.0})});
  expect_refused(decode_generated(m, step_context()).status(), "seconds");
  m = generated(all_four());
  m["stats"]["bandit"] = json::array({json::array({4, -1, 0, 3.0, 0.1, 0.0})});
  expect_refused(decode_generated(m, step_context()).status(), "arm");
  for (json not_object : {json(nullptr), json::array(), json("generated"), json(3)})
    expect_refused(decode_generated(not_object, step_context()).status(), "expected a JSON object");
}

TEST(RlMessages, Generated_TokensOutsideTheVocabularyOrTooLongAreRefused) {
  json comps = all_four();
  comps[0] = completion(4, json::array({1, 100}));
  expect_refused(decode_generated(generated(comps), step_context()).status(),
                 "completions[0].tokens[1]");
  comps[0] = completion(4, json::array({-3}));
  expect_refused(decode_generated(generated(comps), step_context()).status(),
                 "completions[0].tokens[0]");
  comps[0] = completion(4, json(std::vector<int64_t>(17, 1)));
  expect_refused(decode_generated(generated(comps), step_context()).status(), "17 tokens");
}

TEST(RlMessages, Generated_OtherStepWorkerOrPolicyVersionIsRefused) {
  json m = generated(all_four());
  m["step"] = 2;
  expect_refused(decode_generated(m, step_context()).status(), "step");
  m = generated(all_four());
  m["worker"] = 0;
  expect_refused(decode_generated(m, step_context()).status(), "worker");
  m = generated(all_four());
  m["policy_version"] = 7;
  expect_refused(decode_generated(m, step_context()).status(), "policy_version");
  m = generated(all_four());
  m["op"] = "trained";
  expect_refused(decode_generated(m, step_context()).status(), "op");
}

TEST(RlMessages, Generated_BufferOtherThanTheWorkersOwnIsRefused) {
  json m = generated(all_four());
  m["buffer"] = "/run/buffer/step-3-w1.pt";
  EXPECT_TRUE(decode_generated(m, step_context()).ok());
  m["buffer"] = "/etc/passwd";
  expect_refused(decode_generated(m, step_context()).status(), "buffer");
}

TEST(RlMessages, Completed_ForeignOrAlreadyAnsweredIdIsRefused) {
  json m = {{"op", "completed"}, {"step", 3}, {"policy_version", 2}, {"id", 5}, {"tokens", {9, 8}}};
  StepReplyContext c = step_context();
  StatusOr<Completed> r = decode_completed(m, c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->response.id, 5);
  EXPECT_EQ(r->response.tokens, (std::vector<int64_t>{9, 8}));
  c.answered[5] = true;
  expect_refused(decode_completed(m, c).status(), "already answered");
  for (json id : {json(100000), json(int64_t(1) << 40), json(-1), json(2)}) {
    m["id"] = id;
    expect_refused(decode_completed(m, step_context()).status(), "id");
  }
  m["id"] = 5;
  m.erase("tokens");
  expect_refused(decode_completed(m, step_context()).status(), "tokens is missing");
}

// The GPU's busy share is optional (a worker on the CPU sends none) and a share when present.
TEST(RlMessages, DeviceBusyIsAbsentOrAShare) {
  json m = generated(all_four());
  StatusOr<Generated> g = decode_generated(m, step_context());
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->device_busy, -1);
  m["device_busy"] = 0.5;
  g = decode_generated(m, step_context());
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_DOUBLE_EQ(g->device_busy, 0.5);
  for (json bad : {json(1.5), json(-0.1), json("busy"), json(nullptr)}) {
    m["device_busy"] = bad;
    expect_refused(decode_generated(m, step_context()).status(), "device_busy");
  }
  json t = {{"op", "trained"},  {"step", 3},       {"worker", 1},           {"steps", 0},
            {"loss_first", -1}, {"loss_last", -1}, {"stop_latency_s", 0.0}, {"device_busy", 2}};
  expect_refused(decode_trained(t, step_context()).status(), "device_busy");
  t["device_busy"] = 1;
  StatusOr<Trained> tr = decode_trained(t, step_context());
  ASSERT_TRUE(tr.ok()) << tr.status().message();
  EXPECT_DOUBLE_EQ(tr->device_busy, 1.0);
}

TEST(RlMessages, Trained_DrafterOtherThanTheWorkersOwnFileIsRefused) {
  json m = {{"op", "trained"},
            {"step", 3},
            {"worker", 1},
            {"steps", 5},
            {"loss_first", 2.0},
            {"loss_last", 1.5},
            {"drafter", "/run/drafter-w1.ckpt"},
            {"stop_latency_s", 0.01}};
  StatusOr<Trained> t = decode_trained(m, step_context());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->steps, 5);
  EXPECT_EQ(t->drafter, "/run/drafter-w1.ckpt");
  for (const char* path : {"/etc/shadow", "/run/drafter-w0.ckpt", "/run/../drafter-w1.ckpt"}) {
    m["drafter"] = path;
    expect_refused(decode_trained(m, step_context()).status(), "drafter");
  }
  m["drafter"] = "/run/drafter-w1.ckpt";
  m["steps"] = -1;
  expect_refused(decode_trained(m, step_context()).status(), "steps");
  m["steps"] = 0;
  m["loss_last"] = "low";
  expect_refused(decode_trained(m, step_context()).status(), "loss_last");
}

TEST(RlMessages, WeightsAck_VersionsAheadOfThePublishOrCountsOutOfRangeAreRefused) {
  json m = {{"op", "weights"},      {"worker", 2},  {"policy_version", 4},
            {"drafter_version", 1}, {"refused", 1}, {"error", ""}};
  StatusOr<WeightsAck> a = decode_weights_ack(m, 2, 4, 1);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->refused, 1);
  expect_refused(decode_weights_ack(m, 2, 3, 1).status(), "policy_version");
  expect_refused(decode_weights_ack(m, 3, 4, 1).status(), "worker");
  m["refused"] = 1000;
  expect_refused(decode_weights_ack(m, 2, 4, 1).status(), "refused");
  m["refused"] = 0;
  m["error"] = std::string(5000, 'x');
  expect_refused(decode_weights_ack(m, 2, 4, 1).status(), "error");
}

WorkerContext worker_context() {
  WorkerContext c;
  c.dir = "/work/w0", c.vocab = 50, c.max_seq = 32;
  return c;
}

json request(json id) {
  return {{"id", std::move(id)}, {"prompt", {1, 2, 3}},       {"max_new", 8},       {"stop", 0},
          {"more_stop", {5}},    {"seed", uint64_t(1) << 63}, {"temperature", 1.0}, {"top_p", 0.9}};
}

json generate(json requests) {
  return {{"op", "generate"},
          {"step", 2},
          {"policy", "/work/w0/policy-v1.ckpt"},
          {"policy_version", 1},
          {"drafter", "/work/w0/drafter-v0.ckpt"},
          {"drafter_version", 0},
          {"speculative", true},
          {"requests", std::move(requests)},
          {"pool_bandit", true},
          {"bandit_peers", json::array({{2, 0, 0, 1.0, 0.5, 0.0}})}};
}

TEST(RlMessages, Generate_SoundMessageDecodesAndBadRequestsAreRefused) {
  StatusOr<GenerateMessage> g =
      decode_generate(generate(json::array({request(0), request(1)})), worker_context());
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->requests.size(), 2u);
  EXPECT_EQ(g->requests[1].seed, uint64_t(1) << 63);
  EXPECT_EQ(g->requests[1].more_stop, (std::vector<int64_t>{5}));
  EXPECT_EQ(g->bandit_peers.size(), 1u);
  EXPECT_EQ(g->drafter, "/work/w0/drafter-v0.ckpt");

  expect_refused(
      decode_generate(generate(json::array({request(0), request(0)})), worker_context()).status(),
      "repeat request id 0");
  json bad = request(0);
  bad["prompt"] = {1, 50};
  expect_refused(decode_generate(generate(json::array({bad})), worker_context()).status(),
                 "requests[0].prompt[1]");
  bad = request(0);
  bad["max_new"] = 30;  // 3 prompt tokens + 30 > 32 positions
  expect_refused(decode_generate(generate(json::array({bad})), worker_context()).status(),
                 "requests[0].max_new");
  bad = request(0);
  bad["top_p"] = 0;
  expect_refused(decode_generate(generate(json::array({bad})), worker_context()).status(),
                 "requests[0].top_p");
  bad = request(0);
  bad["seed"] = -4;
  expect_refused(decode_generate(generate(json::array({bad})), worker_context()).status(),
                 "requests[0].seed");
  json m = generate(json::array({request(0)}));
  m["policy"] = "/work/w0/../../etc/passwd";
  expect_refused(decode_generate(m, worker_context()).status(), "policy");
  m = generate(json::array({request(0)}));
  m["bandit_peers"] = json::array({{2, 0, 0}});
  expect_refused(decode_generate(m, worker_context()).status(), "bandit_peers");
}

TEST(RlMessages, Train_BuffersOutsideTheWorkersBufferDirectoryAreRefused) {
  json m = {{"op", "train"}, {"step", 2}, {"buffers", {"/work/w0/buffer/step-1-w0.pt"}}};
  StatusOr<TrainMessage> t = decode_train(m, worker_context());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->buffers.size(), 1u);
  m["buffers"] = {"/work/w0/policy-v1.ckpt"};
  expect_refused(decode_train(m, worker_context()).status(), "buffers[0]");
  m["buffers"] = {42};
  expect_refused(decode_train(m, worker_context()).status(), "buffers[0]");
}

TEST(RlMessages, WeightSync_InvitationRoundTripsAndBadOnesAreRefused) {
  WeightSyncInvite g;
  g.generation = 3, g.nonce = std::string(32, 'a'), g.rank = 2, g.world = 3;
  g.store = "/work/w0/weight-sync/g3-aaaa";
  StatusOr<WeightSyncInvite> back = decode_weight_sync(to_json(g), worker_context());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->store, g.store);
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->port, 0);
  json m = to_json(g);
  m["rank"] = 0;
  expect_refused(decode_weight_sync(m, worker_context()).status(), "rank");
  m = to_json(g);
  m["rank"] = 3;
  expect_refused(decode_weight_sync(m, worker_context()).status(), "rank");
  m = to_json(g);
  m["nonce"] = "short";
  expect_refused(decode_weight_sync(m, worker_context()).status(), "nonce");
  m = to_json(g);
  m["store"] = "/tmp/elsewhere";
  expect_refused(decode_weight_sync(m, worker_context()).status(), "store");
  m = to_json(g);
  m["port"] = 29501;
  expect_refused(decode_weight_sync(m, worker_context()).status(), "port");
  g.store = "", g.port = 29501;
  back = decode_weight_sync(to_json(g), worker_context());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->port, 29501);
}

TEST(RlMessages, Stop_SentAtIsOptionalAndFinite) {
  StatusOr<StopMessage> st = decode_stop(to_json(StopMessage{12.5}));
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->sent_at, 12.5);
  st = decode_stop(json{{"op", "stop"}});
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->sent_at, -1);
  expect_refused(decode_stop(json{{"op", "stop"}, {"sent_at", "now"}}).status(), "sent_at");
  expect_refused(decode_stop(json{{"op", "train"}}).status(), "op");
}

// What a receiver decodes from `m` as it crosses the channel (JSON text), encoded again.
template <class Decode>
json round_trip(const json& m, Decode decode) {
  auto back = decode(json::parse(m.dump()));
  EXPECT_TRUE(back.ok()) << back.status().message() << "\n" << m.dump();
  return back.ok() ? to_json(*back) : json();
}

// Every message type's encoder writes what its decoder reads: decoding an encoded message and
// encoding it again gives the same message, field for field.
TEST(RlMessages, EveryMessageRoundTripsThroughItsEncoderAndDecoder) {
  const StepReplyContext c = step_context();
  Completed done;
  done.step = 3, done.policy_version = 2, done.response = {6, {1, 2}, false};
  json m = to_json(done);
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_completed(j, c); }), m);

  Generated g;
  g.step = 3, g.worker = 1, g.policy_version = 2, g.drafter_version = 4;
  for (int64_t id : c.assigned) g.responses.push_back({id, {7, 8, 9}, id % 2 == 0});
  g.stats.tokens = 12, g.stats.plain_steps = 2, g.stats.spec_steps = 3;
  g.stats.request_spec_steps = 5, g.stats.accepted = 6, g.stats.copied = 1;
  g.stats.bandit_absorbed = 2, g.stats.draft_vocab = 40;
  g.stats.arms = {{"ngram", 3}, {"plain", 2}}, g.stats.phases = {{"verify", 0.25}};
  g.stats.has_bandit = true, g.stats.bandit = {{4, 1, 0, 3.0, 0.01, 0.5}};
  g.buffer = "/run/buffer/step-3-w1.pt", g.seconds = 1.5, g.device_busy = 0.625;
  m = to_json(g);
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_generated(j, c); }), m);
  EXPECT_DOUBLE_EQ(decode_generated(m, c)->device_busy, 0.625);
  g.buffer = "", g.stats.has_bandit = false, g.stats.bandit.clear(), g.device_busy = -1;
  m = to_json(g);
  EXPECT_FALSE(m.contains("buffer"));
  EXPECT_FALSE(m.contains("device_busy"));
  EXPECT_FALSE(m.at("stats").contains("bandit"));
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_generated(j, c); }), m);

  Trained t;
  t.step = 3, t.worker = 1, t.steps = 7, t.drafter = "/run/drafter-w1.ckpt";
  t.loss_first = 2.0, t.loss_last = 1.25, t.stop_latency_s = 0.01, t.seconds = 0.5;
  m = to_json(t);
  EXPECT_FALSE(m.contains("device_busy"));
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_trained(j, c); }), m);
  t.device_busy = 0.25;
  m = to_json(t);
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_trained(j, c); }), m);

  WeightsAck ack;
  ack.worker = 2, ack.policy_version = 4, ack.drafter_version = 1, ack.refused = 1;
  ack.error = "gone";
  m = to_json(ack);
  EXPECT_EQ(round_trip(m, [](const json& j) { return decode_weights_ack(j, 2, 4, 1); }), m);

  const WorkerContext w = worker_context();
  GenerateMessage gen;
  gen.step = 2, gen.policy = "/work/w0/policy-v1.ckpt", gen.policy_version = 1;
  gen.drafter = "/work/w0/drafter-v0.ckpt", gen.drafter_version = 0;
  gen.speculative = gen.collect_hidden = gen.stream_completions = gen.pool_bandit = true;
  gen.requests = {{0, {1, 2, 3}, 8, 0, {5}, uint64_t(1) << 63, 1.0, 0.9},
                  {1, {4}, 4, 0, {}, 7, 0.5, 1.0}};
  gen.bandit_peers = {{2, 0, 0, 1.0, 0.5, 0.0}};
  m = to_json(gen);
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_generate(j, w); }), m);
  gen.drafter = "", gen.drafter_version = -1, gen.pool_bandit = false, gen.bandit_peers.clear();
  m = to_json(gen);
  EXPECT_FALSE(m.contains("drafter") || m.contains("bandit_peers"));
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_generate(j, w); }), m);

  m = to_json(TrainMessage{2, {"/work/w0/buffer/step-1-w0.pt", "/work/w0/buffer/step-2-w1.pt"}});
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_train(j, w); }), m);
  m = to_json(WeightsMessage{3, -1});
  EXPECT_EQ(round_trip(m, [](const json& j) { return decode_weights(j); }), m);
  m = to_json(StopMessage{4.5});
  EXPECT_EQ(round_trip(m, [](const json& j) { return decode_stop(j); }), m);
  WeightSyncInvite invite;
  invite.generation = 2, invite.nonce = std::string(32, 'b'), invite.port = 29501;
  m = to_json(invite);
  EXPECT_EQ(round_trip(m, [&](const json& j) { return decode_weight_sync(j, w); }), m);
}

}  // namespace
}  // namespace tlt::rl
