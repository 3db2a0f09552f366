// Structured log lines, one per decision: key=value pairs after a time, a level and a sentence.
//   time=2025-01-02T03:04:05Z level=info msg="Created pod." job=research/x kind=RLJob pod=x-...
// Values with spaces, quotes or '=' are quoted. Lines go to stderr, or to a sink a test sets.
//
// Thread safety: log() may be called from any thread; lines never interleave.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tlt::controller {

using LogFields = std::vector<std::pair<std::string, std::string>>;

void log_info(const std::string& message, const LogFields& fields = {});
void log_warning(const std::string& message, const LogFields& fields = {});
void log_error(const std::string& message, const LogFields& fields = {});

// The formatted line (no newline) for `level`.
std::string format_log(const std::string& level, const std::string& message,
                       const LogFields& fields);

// Sends every line to `sink` instead of stderr (nullptr: back to stderr). For tests.
void set_log_sink(std::function<void(const std::string&)> sink);

}  // namespace tlt::controller
