#include "tokenizer/jinja/builtins.h"

#include "tokenizer/jinja/error.h"

namespace ditto::jinja {

BoundArgs::BoundArgs(const std::string& fn, CallArgs& args, std::initializer_list<const char*> params, size_t required)
    : values_(params.size()), given_(params.size(), false) {
  if (args.args.size() > params.size()) {
    throw RuntimeError("TypeError: " + fn + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                       std::to_string(args.args.size()) + " given)");
  }
  for (size_t i = 0; i < args.args.size(); ++i) {
    values_[i] = args.args[i];
    given_[i] = true;
  }
  for (auto& [key, value] : args.kwargs) {
    size_t i = 0;
    for (const char* p : params) {
      if (key == p) break;
      ++i;
    }
    if (i == params.size())
      throw RuntimeError("TypeError: " + fn + "() got an unexpected keyword argument '" + key + "'");
    if (given_[i]) throw RuntimeError("TypeError: " + fn + "() got multiple values for argument '" + key + "'");
    values_[i] = value;
    given_[i] = true;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!given_[i]) {
      throw RuntimeError("TypeError: " + fn + "() missing required argument '" + *(params.begin() + i) + "'");
    }
  }
}

int64_t int_argument(const Value& v, const std::string& fn) {
  if (v.is_int() || v.is_bool()) return v.to_int();
  throw RuntimeError(std::string("TypeError: ") + fn + "(): '" + v.type_name() +
                     "' object cannot be interpreted as an integer");
}

const std::string& string_argument(const Value& v, const std::string& fn) {
  if (v.is_string()) return v.as_string();
  throw RuntimeError(std::string("TypeError: ") + fn + "(): expected a string, got '" + v.type_name() + "'");
}

}  // namespace ditto::jinja
