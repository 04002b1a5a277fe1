#include "core/error.h"

namespace ditto {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kInternal: return "internal";
    case ErrorCode::kUnauthenticated: return "unauthenticated";
    case ErrorCode::kCancelled: return "cancelled";
  }
  return "unknown";
}

void throw_error(ErrorCode code, const std::string& message) { throw Error(code, message); }

void throw_invalid_field(const std::string& param, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message, param);
}

namespace detail {

CheckFailure::CheckFailure(const char* file, int line, const char* cond) {
  message_ = std::string("internal error: check failed at ") + file + ":" + std::to_string(line) + ": " + cond + ". ";
}

CheckFailure::~CheckFailure() noexcept(false) { throw Error(ErrorCode::kInternal, message_); }

}  // namespace detail
}  // namespace ditto
