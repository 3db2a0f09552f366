// The job secret: a random key that only a job's own processes hold, so that every connection to
// the trainer (rollout and drafter workers) and every member of the weight-sync group can prove it
// belongs to the job. c10d's TCPStore and the driver-worker socket have no authentication of
// their own; the proofs made here stand in for it (docs/security.md, "The job's network surface").
//
// Where it comes from:
//   - a cluster job: the operator creates a Secret `<job>-rl-secret` / `<job>-tst-secret`
//     (owned by the job, key `secret`; operator/controller/job_network.h) and mounts it into the
//     `tlt` container of each of the job's pods at kSecretMountDir; TLT_JOB_SECRET_FILE names
//     the file (default kSecretMountDir/secret);
//   - a local `tlt run`: the driver makes one (generate_job_secret) and hands it to the worker
//     processes it starts through TLT_JOB_SECRET (hex) in their environment.
// load_job_secret() reads TLT_JOB_SECRET first, then the file.
//
// Errors: load_job_secret: NotFound when neither is there (the message says what to set),
// InvalidArgument for a secret shorter than 16 bytes. generate_job_secret: Internal when the
// system's random source fails.
// Thread safety: functions; no shared state.
#pragma once

#include <string>

#include "api/status.h"

namespace tlt::cluster {

inline constexpr const char* kSecretMountDir = "/var/run/secrets/tlt.dev/job";
inline constexpr const char* kSecretEnv = "TLT_JOB_SECRET";           // hex, local workers
inline constexpr const char* kSecretFileEnv = "TLT_JOB_SECRET_FILE";  // path, cluster pods

// 32 random bytes, as 64 lowercase hex digits.
StatusOr<std::string> generate_job_secret();

// The job's secret (its bytes as given: hex text is used as is).
StatusOr<std::string> load_job_secret();

// The driver's secret: load_job_secret(), or, when there is none and `make_if_missing` (a local
// run), a new one put into TLT_JOB_SECRET of this process's environment, which the worker
// processes it starts inherit. Call it before other threads read the environment (setenv).
// Errors: load_job_secret's otherwise; Internal when no secret can be made or set.
StatusOr<std::string> ensure_job_secret(bool make_if_missing);

// HMAC-SHA256 of `message` under `key`, as 64 lowercase hex digits.
std::string hmac_hex(const std::string& key, const std::string& message);

// Compares two strings in time that does not depend on where they first differ.
bool equal_constant_time(const std::string& a, const std::string& b);

// A fresh random nonce (16 bytes, 32 hex digits) for a challenge.
StatusOr<std::string> random_nonce();

}  // namespace tlt::cluster
