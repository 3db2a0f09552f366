// Parsing tlt.dev/progress and folding the leading report into the job's status.
#include "operator/controller/progress.h"

#include <cmath>
#include <limits>

#include "api/spec.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

std::string shown(const Json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

Status bad(const std::string& key, const std::string& want, const Json& got) {
  return Status::InvalidArgument(key + ": want " + want + ", got " + shown(got));
}

// An integer in [0, max] (a float with no fractional part counts: 3.0 is 3).
Status read_int(const Json& o, const char* key, int64_t max, std::optional<int64_t>* out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  const std::string want = "an integer from 0 to " + std::to_string(max);
  if (it->is_number_unsigned()) {  // how the parser keeps a non-negative integer
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) return bad(key, want, *it);
    *out = static_cast<int64_t>(u);
    return Status::Ok();
  }
  if (it->is_number_integer()) {
    int64_t v = it->get<int64_t>();
    if (v < 0 || v > max) return bad(key, want, *it);
    *out = v;
    return Status::Ok();
  }
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || d < 0 || d > static_cast<double>(max) || d != std::floor(d))
      return bad(key, want, *it);
    *out = static_cast<int64_t>(d);
    return Status::Ok();
  }
  return bad(key, want, *it);
}

Status read_number(const Json& o, const char* key, bool non_negative, std::optional<double>* out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  const std::string want = non_negative ? "a number >= 0" : "a number";
  if (!it->is_number()) return bad(key, want, *it);
  double d = it->get<double>();
  if (!std::isfinite(d) || (non_negative && d < 0)) return bad(key, want, *it);
  *out = d;
  return Status::Ok();
}

Status read_string(const Json& o, const char* key, std::string* out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return bad(key, "a string", *it);
  *out = it->get<std::string>();
  return Status::Ok();
}

// Whether `a` should lead rather than `b`.
bool leads(const PodProgress& a, const PodProgress& b, const std::string& lead_role) {
  int64_t sa = a.progress.step.value_or(-1), sb = b.progress.step.value_or(-1);
  if (sa != sb) return sa > sb;
  bool la = a.role == lead_role, lb = b.role == lead_role;
  if (la != lb) return la;
  if (a.index != b.index) return a.index >= 0 && (b.index < 0 || a.index < b.index);
  return a.pod < b.pod;
}

}  // namespace

StatusOr<Progress> parse_progress(const std::string& text) {
  Json o = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded()) return Status::InvalidArgument("not JSON: " + shown(Json(text)));
  if (!o.is_object()) return Status::InvalidArgument("want a JSON object, got " + shown(o));
  Progress p;
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
  TLT_RETURN_IF_ERROR(read_int(o, "step", kMaxInt32, &p.step));
  TLT_RETURN_IF_ERROR(read_number(o, "reward", false, &p.reward));
  TLT_RETURN_IF_ERROR(read_number(o, "loss", false, &p.loss));
  TLT_RETURN_IF_ERROR(read_number(o, "evalLoss", false, &p.eval_loss));
  std::string phase;
  TLT_RETURN_IF_ERROR(read_string(o, "trainingPhase", &phase));
  if (o.contains("trainingPhase") && !o["trainingPhase"].is_null()) {
    if (phase != "superposition" && phase != "recovery" && phase != "baseline")
      return bad("trainingPhase", "superposition, recovery or baseline", o["trainingPhase"]);
    p.training_phase = phase;
  }
  TLT_RETURN_IF_ERROR(read_int(o, "tokensSeen", kMaxInt64, &p.tokens_seen));
  TLT_RETURN_IF_ERROR(read_number(o, "reclaimedGPUSeconds", true, &p.reclaimed_gpu_seconds));
  TLT_RETURN_IF_ERROR(read_number(o, "idleGPUSeconds", true, &p.idle_gpu_seconds));
  TLT_RETURN_IF_ERROR(read_int(o, "drafterVersion", kMaxInt64, &p.drafter_version));
  TLT_RETURN_IF_ERROR(read_number(o, "acceptLength", true, &p.accept_length));
  TLT_RETURN_IF_ERROR(read_string(o, "time", &p.time));
  return p;
}

const PodProgress* leading_progress(const std::vector<PodProgress>& reports,
                                    const std::string& lead_role) {
  const PodProgress* best = nullptr;
  for (const PodProgress& r : reports) {
    if (!best || leads(r, *best, lead_role)) best = &r;
  }
  return best;
}

Json progress_status(const std::string& kind, const Json& stored, const Progress* report) {
  const bool rl = kind == api::kRLJobKind;
  const char* const rl_keys[] = {"step", "reward", "reclaimedGPUSeconds", "idleGPUSeconds",
                                 "drafter"};
  const char* const tst_keys[] = {"step", "loss", "evalLoss", "trainingPhase", "tokensSeen"};
  Json out = Json::object();
  if (stored.is_object()) {
    for (const char* k : rl ? rl_keys : tst_keys) {
      if (stored.contains(k) && !stored[k].is_null()) out[k] = stored[k];
    }
  }
  if (!report) return out;
  const Progress& p = *report;
  int64_t stored_step =
      out.contains("step") && out["step"].is_number_integer() ? out["step"].get<int64_t>() : 0;
  if (p.step && *p.step < stored_step) return out;  // never backwards
  if (p.step) out["step"] = *p.step;
  auto set = [&](const char* key, const auto& v) {
    if (v) out[key] = *v;
  };
  if (rl) {
    set("reward", p.reward);
    set("reclaimedGPUSeconds", p.reclaimed_gpu_seconds);
    set("idleGPUSeconds", p.idle_gpu_seconds);
    if (p.drafter_version || p.accept_length) {
      Json d =
          out.contains("drafter") && out["drafter"].is_object() ? out["drafter"] : Json::object();
      if (p.drafter_version) d["version"] = *p.drafter_version;
      if (p.accept_length) d["acceptLength"] = *p.accept_length;
      out["drafter"] = d;
    }
  } else {
    set("loss", p.loss);
    set("evalLoss", p.eval_loss);
    set("trainingPhase", p.training_phase);
    set("tokensSeen", p.tokens_seen);
  }
  return out;
}

}  // namespace tlt::controller
