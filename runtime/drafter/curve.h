// The drafter's acceptance curve: its greedy agreement with the target (drafter::greedy_agreement)
// on held-out answers, level by level, against the optimizer steps it has trained. Where the curve
// flattens, more warm-start steps stop paying; the last point is what decoding starts with.
//
// Thread safety: values and functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/drafter/trainer.h"

namespace tlt::drafter {

struct CurvePoint {
  int64_t step = 0;          // optimizer steps trained when measured
  LevelAgreement agreement;  // one entry per level
  // Drafts of a greedy chain of agreement.bases.size() levels accepted per verification on the
  // target's greedy text: the sum over levels of share (the bonus token not counted).
  double accepted() const;
};

using AcceptanceCurve = std::vector<CurvePoint>;

// One point on one line: "step 200: d1 0.612 d2 0.301 ... accepted 1.12 of 4".
std::string format_point(const CurvePoint& p);

// A table, one row per point (step, share at d=1..k, accepted drafts per verification), under a
// header naming the bases (positions of level 1 at the first point); "" for an empty curve.
// Every line ends in '\n'.
std::string format_curve(const AcceptanceCurve& curve);

// The curve as one line of text without '\n' or '=' ("step:agreed/bases,...;step:..."), for a
// cache file's metadata, and back. decode_curve returns an empty curve for text it cannot read.
std::string encode_curve(const AcceptanceCurve& curve);
AcceptanceCurve decode_curve(const std::string& text);

}  // namespace tlt::drafter
