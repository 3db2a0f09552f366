// The typed, checked contents of the messages between the RL driver and its rollout workers
// (runtime/rl/channel.h carries them; rollout_phase.cc, weight_publisher.cc and worker.cc write
// and read them; the setup message is runtime/rl/worker_options.h's). Every message type has one
// encoder, to_json (messages_encode.cc), and one decoder, decode_* (messages.cc), and
// decode_*(to_json(x)) == x for a message its receiver expects. Each decode_* reads one message
// and checks every field its receiver uses against what the receiver expects now: the step under
// way, the request ids the worker was given and which of them it already answered, the
// vocabulary and length limits, the files a message may name (runtime/rl/run_dir.h). Nothing is
// used before the whole message passed.
//
// Errors: every decode_* returns InvalidArgument for a message it refuses, naming the message,
// the field and what was expected ("worker 1's generated: completions[3].id is 100000; expected
// one of the 8 request ids it was sent this step"). Its receiver treats the sender as failed:
// the driver restarts (or, for a drafter pod, drops) the worker as it does a dead one; a worker
// exits, and its driver restarts it. No decode_* throws or aborts on any input.
//
// No LibTorch (the fuzz target tests/fuzz/worker_messages_fuzz.cc compiles these two files
// alone).
// Thread safety: functions; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/status.h"

namespace tlt::rl {

// Bounds that hold for every message of a sane run, far above what one carries.
inline constexpr int64_t kMaxMessageRequests = int64_t(1) << 20;  // requests in a generate
inline constexpr int64_t kMaxBanditSteps = int64_t(1) << 20;      // bandit steps in one list
inline constexpr int64_t kMaxStatNames = 64;   // arm or phase names in a worker's statistics
inline constexpr size_t kMaxNameChars = 64;    // an arm's or a phase's name
inline constexpr size_t kMaxTextChars = 4096;  // an error text, a path

// One engine step of a worker's bandit (rollout::ArmSelector::Observation), as the driver passes
// it on to the other workers: JSON [batch, arm, context, tokens, seconds, explore cost].
struct BanditStep {
  int64_t batch = 1;
  int32_t arm = 0, context = 0;
  double tokens = 0, seconds = 0, explore_cost = 0;
};
nlohmann::json to_json(const BanditStep& s);
// `list` (a JSON array of steps; `where` names it): batch >= 1, arm and context in [0, 2^31),
// tokens >= 0, seconds > 0 and explore cost >= 0, all finite; at most kMaxBanditSteps.
StatusOr<std::vector<BanditStep>> decode_bandit_steps(const nlohmann::json& list,
                                                      const std::string& where);

// ---- worker -> driver --------------------------------------------------------------------------

// What the driver expects from worker `worker` during step `step` (policy version step - 1).
struct StepReplyContext {
  int64_t step = 1;
  int worker = 0;
  int64_t vocab = 1;       // token ids are in [0, vocab)
  int64_t max_tokens = 1;  // a response holds at most this many tokens
  // The request ids this worker was sent this step, ascending (empty: none).
  std::vector<int64_t> assigned;
  // Per request id of the step: whether this worker already answered it since it (re)started
  // (a `completed`); its size is the step's request count.
  std::vector<bool> answered;
  std::string run_dir;  // where a worker's files land on the driver's side
};

struct Response {
  int64_t id = 0;
  std::vector<int64_t> tokens;
  bool stopped = false;
};

// {"op":"completed","step","policy_version","id","tokens"}: one response streamed as it
// finished. The step and version the context's; the id one of `assigned`, not yet answered;
// tokens as in a `generated` (`stopped` is not sent: the `generated` reply says it).
struct Completed {
  int64_t step = 1, policy_version = 0;
  Response response;
};
nlohmann::json to_json(const Completed& m);
StatusOr<Completed> decode_completed(const nlohmann::json& m, const StepReplyContext& c);

struct GeneratedStats {
  int64_t tokens = 0, plain_steps = 0, spec_steps = 0, request_spec_steps = 0, accepted = 0;
  int64_t copied = 0, bandit_absorbed = 0, draft_vocab = 0;
  std::map<std::string, int64_t> arms;   // engine steps per arm name
  std::map<std::string, double> phases;  // seconds per engine phase
  bool has_bandit = false;               // the worker kept its bandit steps (pooling)
  std::vector<BanditStep> bandit;        // ... and these are they
};

struct Generated {
  int64_t step = 1;
  int worker = 0;
  int64_t policy_version = 0, drafter_version = -1;  // the versions it generated with
  std::vector<Response> responses;                   // one per assigned id, in the message's order
  GeneratedStats stats;
  std::string buffer;  // the step's hidden states it collected; "" when it collected none
  double seconds = 0;  // how long it took
  // The share of `seconds` its GPU was busy, as the device measured it (runtime/device/busy.h);
  // -1 when it measured none (the CPU, no NVML, a call shorter than the sample period).
  double device_busy = -1;
};

// {"op":"generated","step","worker","policy_version","drafter_version","completions":[{"id",
// "tokens","stopped"}],"stats":{...},"buffer"?,"seconds"?}: the step and worker the context's,
// policy version step - 1; the completions answer every assigned id exactly once and no other;
// tokens in [0, vocab), at most max_tokens; counts non-negative, at most kMaxStatNames arms and
// phases with names of at most kMaxNameChars; draft_vocab at most vocab; the buffer, when named,
// run_dir/buffer/step-<step>-w<worker>.pt; seconds finite and non-negative; device_busy, when
// present, in [0, 1] (absent: -1; the encoder leaves out a negative one).
nlohmann::json to_json(const Generated& m);
StatusOr<Generated> decode_generated(const nlohmann::json& m, const StepReplyContext& c);

struct Trained {
  int64_t step = 1;
  int worker = 0;
  int64_t steps = 0;
  std::string drafter;  // the worker's drafter checkpoint; "" when steps is 0
  double loss_first = -1, loss_last = -1, stop_latency_s = 0;
  double seconds = 0;       // how long it trained
  double device_busy = -1;  // the share of `seconds` its GPU was busy; -1: not measured
};

// {"op":"trained","step","worker","steps","drafter","loss_first","loss_last","stop_latency_s"}:
// step and worker the context's; steps in [0, 2^40]; with steps > 0 the drafter is the worker's
// own file, run_dir/drafter-w<worker>.ckpt; losses and latency finite; device_busy as in a
// `generated`.
nlohmann::json to_json(const Trained& m);
StatusOr<Trained> decode_trained(const nlohmann::json& m, const StepReplyContext& c);

struct WeightsAck {
  int worker = 0;
  int64_t policy_version = -1, drafter_version = -1;  // held now; -1: none yet
  int64_t refused = 0;                                // publishes refused
  std::string error;                                  // the group broke: "" when it did not
};

// {"op":"weights","worker","policy_version","drafter_version","refused","error"}: a member's
// answer to a publish of policy `policy_version` (and drafter `drafter_version`, -1: none):
// worker the sender; versions in [-1, the newest published]; refused in [0, 2]; error text at
// most kMaxTextChars.
nlohmann::json to_json(const WeightsAck& m);
StatusOr<WeightsAck> decode_weights_ack(const nlohmann::json& m, int worker, int64_t policy_version,
                                        int64_t drafter_version);

// ---- driver -> worker --------------------------------------------------------------------------

// What a worker expects from its driver.
struct WorkerContext {
  std::string dir;      // its directory: every file a message names lies under it
  int64_t vocab = 1;    // the policy's
  int64_t max_seq = 1;  // the engine's positions: a prompt and its new tokens fit
};

struct GenerateRequest {
  int64_t id = 0;
  std::vector<int64_t> prompt;
  int32_t max_new = 1;
  int64_t stop = 0;
  std::vector<int64_t> more_stop;
  uint64_t seed = 0;
  double temperature = 1.0, top_p = 1.0;
};

struct GenerateMessage {
  int64_t step = 1, policy_version = 0;
  std::string policy;
  int64_t drafter_version = -1;  // -1: keep the drafter
  std::string drafter;
  bool speculative = false, collect_hidden = false, stream_completions = false;
  bool pool_bandit = false;
  std::vector<GenerateRequest> requests;
  std::vector<BanditStep> bandit_peers;
};

// {"op":"generate",...} (runtime/rl/rollout_phase.cc writes it): step >= 1, policy version >= 0,
// policy (and drafter with drafter_version >= 0) files under dir; requests with distinct ids
// >= 0, a non-empty prompt of ids in [0, vocab) that leaves max_new in [1, max_seq) positions,
// stop ids in [0, vocab), temperature finite >= 0, top_p in (0, 1]; bandit_peers as
// decode_bandit_steps. The encoder writes drafter and drafter_version only for a
// drafter_version >= 0, bandit_peers only with pool_bandit.
nlohmann::json to_json(const GenerateMessage& m);
StatusOr<GenerateMessage> decode_generate(const nlohmann::json& m, const WorkerContext& c);

// {"op":"train","step","buffers":[paths]}: step >= 1; each buffer a file under dir/buffer/.
struct TrainMessage {
  int64_t step = 1;
  std::vector<std::string> buffers;
};
nlohmann::json to_json(const TrainMessage& m);
StatusOr<TrainMessage> decode_train(const nlohmann::json& m, const WorkerContext& c);

// {"op":"weights","policy_version","drafter_version"}: the versions the driver publishes now.
struct WeightsMessage {
  int64_t policy_version = 0, drafter_version = -1;
};
nlohmann::json to_json(const WeightsMessage& m);
StatusOr<WeightsMessage> decode_weights(const nlohmann::json& m);

// {"op":"stop","sent_at"}: a training worker stops at its next optimizer-step boundary and
// answers `trained`. sent_at (the driver's runtime::now_s() when it sent it, for the stop's
// latency) is optional: -1 when absent; else finite and non-negative.
struct StopMessage {
  double sent_at = -1;
};
nlohmann::json to_json(const StopMessage& m);
StatusOr<StopMessage> decode_stop(const nlohmann::json& m);

// A generation of the weight-sync group a worker is asked to join (the setup message's
// "weight_sync" object, or {"op":"weight_sync",...}: the encoder writes the object without "op",
// the decoder does not read it).
struct WeightSyncInvite {
  int64_t generation = 1;  // with the nonce, what the generation's proof is derived from
  std::string nonce;       // 32 hex digits
  int rank = 1, world = 2;
  int port = 0;       // rank 0's store port (a cluster job); 0 with a store file
  std::string store;  // a local group's store file (under dir/weight-sync/); "" for a port
  int rendezvous_timeout_s = 120, timeout_s = 300;
  int64_t bucket_bytes = int64_t(32) << 20;
  bool cuda = false;
};
nlohmann::json to_json(const WeightSyncInvite& g);
// generation >= 1; nonce 32 hex digits; rank in [1, world), world in [2, 65536]; exactly one
// of port (1-65535) and store (a file under dir/weight-sync/); timeouts in [1, 86400] s; bucket
// bytes in [8, 2^30].
StatusOr<WeightSyncInvite> decode_weight_sync(const nlohmann::json& m, const WorkerContext& c);

}  // namespace tlt::rl
