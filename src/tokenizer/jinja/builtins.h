// Shared by the built-in filters, tests and globals: Python-style argument binding.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

// Binds `args` to the named parameters like a Python signature (positional, then keywords); the
// first `required` parameters must be given. Throws RuntimeError naming `fn` for a missing
// required argument, too many arguments, an unknown keyword or one given twice.
class BoundArgs {
 public:
  BoundArgs(const std::string& fn, CallArgs& args, std::initializer_list<const char*> params, size_t required = 0);
  bool has(size_t i) const { return given_[i]; }
  const Value& get(size_t i) const { return values_[i]; }
  Value get_or(size_t i, Value dflt) const { return given_[i] ? values_[i] : std::move(dflt); }

 private:
  std::vector<Value> values_;
  std::vector<bool> given_;
};

// An int argument (bool counts, as in Python); throws naming `fn` otherwise.
int64_t int_argument(const Value& v, const std::string& fn);
// A string argument; throws naming `fn` otherwise.
const std::string& string_argument(const Value& v, const std::string& fn);

}  // namespace ditto::jinja
