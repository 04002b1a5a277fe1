// Errors of the template engine. Builtins (filters, tests, methods) throw RuntimeError with a
// Python-like message and no position; the interpreter adds the template name and line and
// rethrows a TemplateError, which is a ditto::Error(kInvalidArgument) whose message reads
//   template '<name>', line <n>: <what went wrong>
#pragma once

#include <stdexcept>
#include <string>

#include "core/error.h"

namespace ditto::jinja {

class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& message, bool raised_by_template = false)
      : std::runtime_error(message), raised_by_template_(raised_by_template) {}
  // True for raise_exception(msg): the message is the template author's own.
  bool raised_by_template() const { return raised_by_template_; }

 private:
  bool raised_by_template_;
};

class TemplateError : public Error {
 public:
  enum class Kind { kSyntax, kRuntime, kRaised };
  TemplateError(Kind kind, const std::string& template_name, int line, const std::string& detail);
  Kind kind() const { return kind_; }
  const std::string& template_name() const { return template_name_; }
  int line() const { return line_; }
  // The message without the position: for kRaised, exactly the template's raise_exception text.
  const std::string& detail() const { return detail_; }

 private:
  Kind kind_;
  std::string template_name_;
  int line_;
  std::string detail_;
};

}  // namespace ditto::jinja
