// The one error type of ditto: a code (what kind of failure) and a message that names the file,
// tensor, field or parameter at fault. Layers above map the code to exit codes and HTTP statuses.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ditto {

enum class ErrorCode {
  kInvalidArgument,    // bad input from the user: a flag, a request field, a malformed file
  kNotFound,           // a file, tensor or model that does not exist
  kResourceExhausted,  // out of memory, KV blocks, or another bounded resource
  kInternal,           // a broken invariant inside ditto (a bug)
};

std::string_view error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Shorthands that keep call sites on one line: throw invalid_argument("config.json: ...").
[[noreturn]] void throw_error(ErrorCode code, const std::string& message);
[[noreturn]] inline void throw_invalid_argument(const std::string& m) {
  throw_error(ErrorCode::kInvalidArgument, m);
}
[[noreturn]] inline void throw_not_found(const std::string& m) { throw_error(ErrorCode::kNotFound, m); }

}  // namespace ditto

// DITTO_CHECK(cond) << "context": an internal invariant; failing it is a bug in ditto, reported
// as ErrorCode::kInternal with file and line (never an abort, so a server survives it).
#define DITTO_CHECK(cond)                                                              \
  if (cond) {                                                                          \
  } else                                                                               \
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
