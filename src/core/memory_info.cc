#include "core/memory_info.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

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

}  // namespace ditto
