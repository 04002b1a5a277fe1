// ditto::Error (include/ditto/error.h) and the shorthands to throw it; DITTO_CHECK for internal
// invariants. Layers above map the code to exit codes and HTTP statuses (one function each:
// tools/ditto_main.cc and server/api_error.h).
#pragma once

#include <string>
#include <string_view>

#include "ditto/error.h"

namespace ditto {

// Shorthands that keep call sites on one line: throw invalid_argument("config.json: ...").
[[noreturn]] void throw_error(ErrorCode code, const std::string& message);
[[noreturn]] inline void throw_invalid_argument(const std::string& m) { throw_error(ErrorCode::kInvalidArgument, m); }
[[noreturn]] inline void throw_not_found(const std::string& m) { throw_error(ErrorCode::kNotFound, m); }
// Error(kInvalidArgument) naming the request field at fault: throw_invalid_field("top_p", "...").
[[noreturn]] void throw_invalid_field(const std::string& param, const std::string& message);

}  // namespace ditto

// DITTO_CHECK(cond) << "context": an internal invariant; failing it is a bug in ditto, reported
// as ErrorCode::kInternal with file and line (never an abort, so a server survives it).
#define DITTO_CHECK(cond) \
  if (cond) {             \
  } else                  \
    ::ditto::detail::CheckFailure(__FILE__, __LINE__, #cond)

namespace ditto::detail {
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure() noexcept(false);
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    append(value);
    return *this;
  }

 private:
  void append(std::string_view s) { message_ += s; }
  void append(const char* s) { message_ += s; }
  void append(const std::string& s) { message_ += s; }
  template <typename T>
  void append(const T& value) {
    message_ += std::to_string(value);
  }
  std::string message_;
};
}  // namespace ditto::detail
