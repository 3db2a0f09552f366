#include "operator/rebalancer/promql.h"

#include <iterator>

#include "operator/rebalancer/common.h"

namespace tlt::rebalancer {

namespace {

// A name as a PromQL regex (names are DNS subdomains: only '.' is special) inside a string
// literal, where the backslash itself must be escaped.
std::string regex_literal(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '.' ? std::string("\\\\.") : std::string(1, c);
  return out;
}

}  // namespace

UtilisationQueries utilisation_queries(const api::RebalancingSpec& spec,
                                       const std::string& namespace_, const std::string& job) {
  UtilisationQueries q;
  q.pod_label = spec.pod_label.empty() ? "pod" : spec.pod_label;
  std::string pods = q.pod_label + "=~\"" + regex_literal(job) + "-rollout-[0-9]+\"";
  std::string sel;
  if (spec.metric.rfind("DCGM_", 0) == 0) {
    std::string ns_label = q.pod_label == "exported_pod" ? "exported_namespace" : "namespace";
    sel = "{" + ns_label + "=\"" + namespace_ + "\"," + pods + "}";
    q.scale = spec.metric == "DCGM_FI_DEV_GPU_UTIL" ? 0.01 : 1.0;
  } else {
    sel = "{job=\"" + job + "\"," + pods + "}";
  }
  std::string range = "[" + std::to_string(window_of(spec).count()) + "s]";
  q.idle = "max by (" + q.pod_label + ") (max_over_time(" + spec.metric + sel + range + "))";
  q.busy = "max by (" + q.pod_label + ") (min_over_time(" + spec.metric + sel + range + "))";
  return q;
}

Utilisation read_utilisation(const UtilisationQueries& q, const std::vector<Sample>& idle,
                             const std::vector<Sample>& busy) {
  Utilisation out;
  std::map<std::string, int> seen;  // 1 idle, 2 busy
  for (const auto& [samples, which] : {std::make_pair(&idle, 1), std::make_pair(&busy, 2)}) {
    for (const Sample& s : *samples) {
      auto it = s.labels.find(q.pod_label);
      if (it == s.labels.end()) continue;
      (which == 1 ? out[it->second].first : out[it->second].second) = s.value * q.scale;
      seen[it->second] |= which;
    }
  }
  for (auto it = out.begin(); it != out.end();) {  // only pods both queries know
    it = seen[it->first] == 3 ? std::next(it) : out.erase(it);
  }
  return out;
}

}  // namespace tlt::rebalancer
