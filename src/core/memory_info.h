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

// "2GiB", "512MiB", "1.5GB", "1000000" (bytes) as bytes: a number and one of the units B, KB, MB,
// GB, TB (powers of 10) or KiB, MiB, GiB, TiB (powers of 2). Throws Error(kInvalidArgument) naming
// `what` (a flag or field) for anything else, zero, negative, or 9e18 bytes and more.
int64_t parse_size_bytes(const std::string& text, const std::string& what);

}  // namespace ditto
