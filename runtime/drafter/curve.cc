#include "runtime/drafter/curve.h"

#include <cinttypes>
#include <cstdio>
#include <sstream>

namespace tlt::drafter {

double CurvePoint::accepted() const {
  double sum = 0;
  for (size_t d = 0; d < agreement.bases.size(); ++d) sum += agreement.share(d);
  return sum;
}

std::string format_point(const CurvePoint& p) {
  std::ostringstream s;
  char buf[32];
  s << "step " << p.step << ":";
  for (size_t d = 0; d < p.agreement.bases.size(); ++d) {
    std::snprintf(buf, sizeof buf, " d%zu %.3f", d + 1, p.agreement.share(d));
    s << buf;
  }
  std::snprintf(buf, sizeof buf, " accepted %.2f of %zu", p.accepted(), p.agreement.bases.size());
  return s.str() + buf;
}

std::string format_curve(const AcceptanceCurve& curve) {
  if (curve.empty()) return "";
  const LevelAgreement& first = curve.front().agreement;
  size_t levels = first.bases.size();
  std::ostringstream s;
  char buf[64];
  s << "drafter acceptance curve: share of " << (levels ? first.bases[0] : 0)
    << " held-out positions whose first d greedy drafts all match the target, by training step\n";
  s << "   step";
  for (size_t d = 0; d < levels; ++d) {
    std::snprintf(buf, sizeof buf, "   d=%-2zu", d + 1);
    s << buf;
  }
  s << "  accepted per verification\n";
  for (const CurvePoint& p : curve) {
    std::snprintf(buf, sizeof buf, "%7" PRId64, p.step);
    s << buf;
    for (size_t d = 0; d < levels; ++d) {
      std::snprintf(buf, sizeof buf, "  %.3f", p.agreement.share(d));
      s << buf;
    }
    std::snprintf(buf, sizeof buf, "  %.2f\n", p.accepted());
    s << buf;
  }
  return s.str();
}

std::string encode_curve(const AcceptanceCurve& curve) {
  std::ostringstream s;
  for (size_t i = 0; i < curve.size(); ++i) {
    s << (i ? ";" : "") << curve[i].step << ":";
    const LevelAgreement& a = curve[i].agreement;
    for (size_t d = 0; d < a.bases.size(); ++d)
      s << (d ? "," : "") << a.agreed[d] << "/" << a.bases[d];
  }
  return s.str();
}

AcceptanceCurve decode_curve(const std::string& text) {
  AcceptanceCurve out;
  std::istringstream points(text);
  std::string point;
  while (std::getline(points, point, ';')) {
    CurvePoint p;
    std::istringstream in(point);
    char colon = 0, slash = 0;
    if (!(in >> p.step >> colon) || colon != ':') return {};
    int64_t agreed = 0, bases = 0;
    while (in >> agreed >> slash >> bases) {
      if (slash != '/' || agreed < 0 || agreed > bases) return {};
      p.agreement.agreed.push_back(agreed), p.agreement.bases.push_back(bases);
      char comma = 0;
      if (!(in >> comma)) break;
      if (comma != ',') return {};
    }
    if (p.agreement.bases.empty()) return {};
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tlt::drafter
