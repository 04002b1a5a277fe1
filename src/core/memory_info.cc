#include "core/memory_info.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace ditto {

std::optional<int64_t> mem_available_bytes() {
  if (const char* forced = std::getenv("DITTO_MEM_AVAILABLE"); forced != nullptr && *forced != '\0')
    return std::strtoll(forced, nullptr, 10);
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

std::string format_gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

int64_t parse_size_bytes(const std::string& text, const std::string& what) {
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    throw_invalid_argument(what + ": expected a size such as 2GiB or 512MB, got '" + text + "'");
  }
  const std::string unit = text.substr(end);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"B", 1},        {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits)
    if (unit == name && value > 0 && value * scale < 9.0e18) return static_cast<int64_t>(value * scale);
  throw_invalid_argument(what +
                         ": expected a positive size with a unit B, KB, MB, GB, TB, KiB, MiB, GiB or TiB "
                         "(e.g. 2GiB), got '" +
                         text + "'");
}

}  // namespace ditto
