// The names shared by the operator and the trainer pods of an RLJob for the group of trainer
// ranks (spec.roles.trainer.replicas = N > 1; runtime/rl/trainer_ranks.h):
//
//   TLT_INDEX               the pod's rank, 0..N-1 (as for every role)
//   TLT_TRAINER_WORLD       N, fixed when the pod was made; unset: spec.roles.trainer.replicas
//   TLT_TRAINER_GROUP_PORT  where rank 0 hosts the group's rendezvous store (default 29502); the
//                           job's headless Service carries it
//   TLT_TRAINER_GROUP_ADDRESS  host:port (or a host, on TLT_TRAINER_GROUP_PORT) ranks > 0 reach
//                           rank 0's store at; default <job>-trainer-0.<TLT_SERVICE>
//
// Rank 0 (<job>-trainer-0) listens on the port on every interface; a rank r > 0 connects to
// TLT_TRAINER_GROUP_ADDRESS, else to <job>-trainer-0.<TLT_SERVICE> (api::pod_name, as the rollout
// pods find the trainer).
#pragma once

namespace tlt::api {

inline constexpr const char* kTrainerWorldEnv = "TLT_TRAINER_WORLD";
inline constexpr const char* kTrainerGroupPortEnv = "TLT_TRAINER_GROUP_PORT";
inline constexpr const char* kTrainerGroupAddressEnv = "TLT_TRAINER_GROUP_ADDRESS";
inline constexpr int kDefaultTrainerGroupPort = 29502;

}  // namespace tlt::api
