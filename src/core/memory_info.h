// How much memory this machine can still give: MemAvailable of /proc/meminfo (the kernel's
// estimate of memory available without swapping, page cache it can drop included).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ditto {

// Bytes available, or nullopt where /proc/meminfo has no MemAvailable (non-Linux).
// $DITTO_MEM_AVAILABLE (bytes), when set, replaces the measurement — a test double, so the
// "does not fit" paths can be tested on any machine.
std::optional<int64_t> mem_available_bytes();

// "1.50 GiB".
std::string format_gib(int64_t bytes);

}  // namespace ditto
