// ditto's one error type: a code (what kind of failure), a message that names the file, tensor,
// field or parameter at fault, and — for a request's fault — the request field itself (`param`,
// OpenAI's name for it), carried with the error rather than recovered from its text. Every
// function of the public API reports failure by throwing it.
// Part of ditto's public C++ API (self-contained: the standard library only).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ditto {

enum class ErrorCode {
  kInvalidArgument,    // bad input from the user: a flag, a request field, a malformed file
  kNotFound,           // a file, tensor or model that does not exist
  kResourceExhausted,  // out of memory, KV blocks, or another bounded resource
  kInternal,           // a broken invariant inside ditto (a bug)
  kUnauthenticated,    // a missing or wrong API key
  kCancelled,          // the client went away before its answer was ready
};

std::string_view error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, std::string param = "")
      : std::runtime_error(message), code_(code), param_(std::move(param)) {}
  ErrorCode code() const { return code_; }
  // The request field at fault ("top_p", "messages", "max_tokens"), or "" when none is.
  const std::string& param() const { return param_; }

 private:
  ErrorCode code_;
  std::string param_;
};

}  // namespace ditto
