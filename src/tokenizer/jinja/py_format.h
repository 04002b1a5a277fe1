// Python's text forms of values: str() (what {{ x }} prints), repr() (how a list prints its
// items), float repr (shortest round-trip digits, "1e+16" / "1e-05" / "100.0"), and json.dumps
// with the arguments Hugging Face's tojson passes (ensure_ascii, indent, separators, sort_keys).
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

// str(x). Undefined prints as "" (jinja2's default Undefined).
std::string py_str(const Value& v);
// repr(x): strings quoted and escaped as Python does ('it\'s' -> "it's").
std::string py_repr(const Value& v);
std::string py_float_repr(double f);
std::string py_string_repr(const std::string& s);

// Python's printf-style `fmt % args` (what jinja2's |format filter does): %s %r %d %i %u %f %F %e
// %E %g %G %x %X %o %c %% with flags, width, precision and %(key)s for a dict argument.
std::string py_percent_format(const std::string& fmt, const Value& args);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // None: one line; else the per-level indent text
  std::optional<std::string> item_separator;  // default ", " (one line) or "," (indented)
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
};

// json.dumps(v, ...). Throws RuntimeError for values JSON cannot hold (Undefined, namespace,
// callables: "Object of type Undefined is not JSON serializable") and unsortable keys.
std::string py_json_dumps(const Value& v, const JsonOptions& options);

}  // namespace ditto::jinja
