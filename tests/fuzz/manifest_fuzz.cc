// Fuzz target: any bytes given to the manifest parser must give documents or errors, never a
// crash, leak or hang; and every job that validates must survive the JSON round trip the
// operator performs (encode, decode from the apiserver's JSON, encode again) unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/encode.h"
#include "api/manifest.h"

namespace {

void check_round_trip(const tlt::api::Job& job) {
  nlohmann::json first = std::visit([](const auto& j) { return tlt::api::to_json(j); }, job);
  tlt::StatusOr<tlt::api::Job> again = tlt::api::parse_job_json(first);
  if (!again.ok()) {
    std::fprintf(stderr, "valid job failed to decode from its own JSON: %s\n%s\n",
                 again.status().to_string().c_str(), first.dump(2).c_str());
    std::abort();
  }
  nlohmann::json second = std::visit([](const auto& j) { return tlt::api::to_json(j); }, *again);
  if (first != second) {
    std::fprintf(stderr, "round trip changed the job:\n%s\n%s\n", first.dump(2).c_str(),
                 second.dump(2).c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  for (const tlt::api::Document& doc : tlt::api::parse_manifests(text)) {
    for (const tlt::api::FieldError& e : doc.errors) {
      if (e.message.empty()) std::abort();  // every error must say something
    }
    if (doc.ok()) check_round_trip(*doc.job);
  }
  return 0;
}
