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

}  // namespace tlt::api
