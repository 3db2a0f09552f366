// Validation of decoded job objects: ranges, allowed values and formats from the field tables
// of api/spec.h, then each struct's cross-field check(). Returns every problem at once, each
// with its field path and what to do, e.g.
//   spec.roles.rollout.replicas: must be >= 1 (got 0)
//
// Thread safety: stateless functions.
#pragma once

#include "api/field.h"
#include "api/spec.h"

namespace tlt::api {

// Appends every problem of `job` (apiVersion, kind, metadata and spec; not status) to
// `*errors`. An empty result means the job can run.
void validate(const RLJob& job, FieldErrors* errors);
void validate(const TSTPretrainJob& job, FieldErrors* errors);

// Formats a number the way error messages show it: 0.05, 1e-05, 32.
std::string format_number(double v);

// Seconds as people write them: "30 s", "1.5 s", "0.25 s".
std::string format_seconds(double seconds);

// The positions an RLJob's rollouts keep free past the longest response, for the drafter's
// proposals: a prompt may take what the model's context leaves besides
// spec.algorithm.maxResponseTokens and these.
inline constexpr int64_t kDraftHeadroom = 64;

// The rule that relates an RLJob to its model, checked where the model's context is known (the
// runtime, `tlt validate` reading the model's config): a model of `context` positions must leave
// a prompt room next to maxResponseTokens and the draft headroom. Appends an error on
// spec.algorithm.maxResponseTokens that gives the numbers (`model` names the model in it:
// "spec.model.path /models/x.gguf", "preset tiny").
void check_model_context(const AlgorithmSpec& algorithm, int64_t context, const std::string& model,
                         FieldErrors* errors);

}  // namespace tlt::api
