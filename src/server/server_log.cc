#include "server/server_log.h"

#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

namespace ditto {

std::string log_time() {
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return when;
}

void log_event(const std::string& format, const std::string& level, const std::string& message) {
  const nlohmann::ordered_json j = {{"time", log_time()}, {"level", level}, {"message", message}};
  std::string line = format == "json" ? j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                      : "ditto serve: " + (level == "info" ? "" : level + ": ") + message;
  line += "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines from threads do not interleave
}

}  // namespace ditto
