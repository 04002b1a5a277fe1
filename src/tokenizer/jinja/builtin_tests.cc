// jinja2's built-in tests (jinja2/tests.py): `x is defined`, `x is string`, `x is equalto y`, ...
#include <cmath>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/environment.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/unicode.h"

namespace ditto::jinja {
namespace {

using Predicate = bool (*)(const Value&);

void add_unary(Environment& env, const char* name, Predicate p) {
  const std::string n = name;
  env.tests[name] = [n, p](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs(n, args, {});
    return p(v);
  };
}

void add_compare(Environment& env, std::initializer_list<const char*> names, CompareOp op) {
  for (const char* name : names) {
    const std::string n = name;
    env.tests[name] = [n, op](Interpreter&, const Value& v, CallArgs& args) {
      BoundArgs a(n, args, {"other"}, 1);
      return compare(op, v, a.get(0));
    };
  }
}

// value % divisor == expected, with Python's % (jinja2's odd/even/divisibleby).
bool modulo_is(const Value& value, const Value& divisor, int64_t expected, size_t max_size) {
  return py_equals(binary_op(BinaryOp::kMod, value, divisor, max_size), Value(expected));
}

}  // namespace

void register_builtin_tests(Environment& env) {
  add_unary(env, "defined", [](const Value& v) { return !v.is_undefined(); });
  add_unary(env, "undefined", [](const Value& v) { return v.is_undefined(); });
  add_unary(env, "none", [](const Value& v) { return v.is_none(); });
  add_unary(env, "boolean", [](const Value& v) { return v.is_bool(); });
  add_unary(env, "false", [](const Value& v) { return v.is_bool() && !v.as_bool(); });
  add_unary(env, "true", [](const Value& v) { return v.is_bool() && v.as_bool(); });
  add_unary(env, "integer", [](const Value& v) { return v.is_int(); });
  add_unary(env, "float", [](const Value& v) { return v.is_float(); });
  add_unary(env, "number", [](const Value& v) { return v.is_number(); });
  add_unary(env, "string", [](const Value& v) { return v.is_string(); });
  add_unary(env, "mapping", [](const Value& v) { return v.is_dict(); });
  // Undefined defines __call__ (to raise), so callable() is true for it.
  add_unary(env, "callable", [](const Value& v) { return v.is_callable() || v.is_undefined(); });
  add_unary(env, "escaped", [](const Value&) { return false; });
  // len() and __getitem__: strings, lists, tuples, dicts -- and Undefined, which has both.
  add_unary(env, "sequence",
            [](const Value& v) { return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined(); });
  add_unary(env, "iterable", [](const Value& v) {
    return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined() || v.is_iterator();
  });
  add_unary(env, "lower", [](const Value& v) {
    const std::string s = py_str(v);
    bool cased = false;
    for (char32_t c : utf8::to_utf32(s)) {
      if (py_isupper(c)) return false;
      cased = cased || py_islower(c);
    }
    return cased;
  });
  add_unary(env, "upper", [](const Value& v) {
    const std::string s = py_str(v);
    bool cased = false;
    for (char32_t c : utf8::to_utf32(s)) {
      if (py_islower(c)) return false;
      cased = cased || py_isupper(c);
    }
    return cased;
  });
  env.tests["odd"] = [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs("odd", args, {});
    return modulo_is(v, Value(2), 1, in.max_size());
  };
  env.tests["even"] = [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs("even", args, {});
    return modulo_is(v, Value(2), 0, in.max_size());
  };
  env.tests["divisibleby"] = [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs a("divisibleby", args, {"num"}, 1);
    return modulo_is(v, a.get(0), 0, in.max_size());
  };
  env.tests["sameas"] = [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("sameas", args, {"other"}, 1);
    const Value& o = a.get(0);
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
      case Value::Kind::kNone: return true;
      case Value::Kind::kBool:
      case Value::Kind::kInt:
      case Value::Kind::kString: return py_equals(v, o);
      default: return v.same_object(o);
    }
  };
  env.tests["in"] = [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("in", args, {"seq"}, 1);
    return py_contains(a.get(0), v);
  };
  env.tests["filter"] = [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs("filter", args, {});
    return v.is_string() && in.env().filters.count(v.as_string()) > 0;
  };
  env.tests["test"] = [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs("test", args, {});
    return v.is_string() && in.env().tests.count(v.as_string()) > 0;
  };
  add_compare(env, {"==", "eq", "equalto"}, CompareOp::kEq);
  add_compare(env, {"!=", "ne"}, CompareOp::kNe);
  add_compare(env, {">", "gt", "greaterthan"}, CompareOp::kGt);
  add_compare(env, {">=", "ge"}, CompareOp::kGtEq);
  add_compare(env, {"<", "lt", "lessthan"}, CompareOp::kLt);
  add_compare(env, {"<=", "le"}, CompareOp::kLtEq);
}

}  // namespace ditto::jinja
