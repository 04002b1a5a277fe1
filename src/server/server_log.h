// The server's own lines on stderr (not the access log): start-up facts, warnings, draining,
// stopping, engine restarts — in the access log's format, so with --log-format json every line
// the server writes is one JSON object.
#pragma once

#include <string>

namespace ditto {

// A server event on stderr: text "ditto serve: [LEVEL: ]MESSAGE" (no prefix for "info"), or with
// format "json" one object {"time", "level", "message"} per line (invalid UTF-8 replaced).
// Thread-safe: one write per line, so lines from several threads do not interleave.
void log_event(const std::string& format, const std::string& level, const std::string& message);

// Now in UTC as every log line writes it: "2025-01-31T12:00:00Z".
std::string log_time();

}  // namespace ditto
