// key=value log lines on stderr.
#include "operator/controller/log.h"

#include <iostream>
#include <mutex>

#include "operator/controller/clock.h"

namespace tlt::controller {
namespace {

std::mutex g_mu;
std::function<void(const std::string&)> g_sink;  // guarded by g_mu

std::string quote(const std::string& v) {
  bool plain = !v.empty();
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\n' || c == '\\') plain = false;
  }
  if (plain) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

void emit(const std::string& level, const std::string& message, const LogFields& fields) {
  std::string line = format_log(level, message, fields);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sink) {
    g_sink(line);
  } else {
    std::cerr << line << "\n" << std::flush;
  }
}

}  // namespace

std::string format_log(const std::string& level, const std::string& message,
                       const LogFields& fields) {
  std::string line =
      "time=" + format_time(RealClock().now()) + " level=" + level + " msg=" + quote(message);
  for (const auto& [k, v] : fields) line += " " + k + "=" + quote(v);
  return line;
}

void log_info(const std::string& message, const LogFields& fields) {
  emit("info", message, fields);
}
void log_warning(const std::string& message, const LogFields& fields) {
  emit("warning", message, fields);
}
void log_error(const std::string& message, const LogFields& fields) {
  emit("error", message, fields);
}

void set_log_sink(std::function<void(const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_sink = std::move(sink);
}

}  // namespace tlt::controller
