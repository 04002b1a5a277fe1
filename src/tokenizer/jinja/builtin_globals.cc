// jinja2's default globals: range (bounded like the sandbox's), dict, namespace, joiner; cycler
// and lipsum are stubs that fail when called.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/environment.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/operators.h"

namespace ditto::jinja {
namespace {

// dict(*args, **kwargs) / namespace(*args, **kwargs): a mapping or (key, value) pairs, then keywords.
Dict dict_from_args(const std::string& fn, CallArgs& args) {
  Dict d;
  if (args.args.size() > 1)
    throw RuntimeError("TypeError: " + fn + " expected at most 1 argument, got " + std::to_string(args.args.size()));
  if (!args.args.empty()) {
    const Value& src = args.args[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else {
      for (const Value& pair : py_iterate(src)) {
        const List kv = py_iterate(pair);
        if (kv.size() != 2)
          throw RuntimeError("ValueError: dictionary update sequence element has length " + std::to_string(kv.size()) +
                             "; 2 is required");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.kwargs) d.set(Value(k), v);
  return d;
}

}  // namespace

void register_builtin_globals(Environment& env) {
  env.globals["range"] = Value::callable("range", [](Interpreter& in, CallArgs& args) {
    if (!args.kwargs.empty()) throw RuntimeError("TypeError: range() takes no keyword arguments");
    if (args.args.empty() || args.args.size() > 3) {
      throw RuntimeError("TypeError: range expected 1 to 3 arguments, got " + std::to_string(args.args.size()));
    }
    int64_t start = 0, stop = 0, step = 1;
    if (args.args.size() == 1) {
      stop = int_argument(args.args[0], "range");
    } else {
      start = int_argument(args.args[0], "range");
      stop = int_argument(args.args[1], "range");
      if (args.args.size() == 3) step = int_argument(args.args[2], "range");
    }
    if (step == 0) throw RuntimeError("ValueError: range() arg 3 must not be zero");
    const __int128 span =
        step > 0 ? (__int128(stop) - start + step - 1) / step : (__int128(start) - stop - step - 1) / -step;
    const int64_t n = span > 0 ? static_cast<int64_t>(std::min<__int128>(span, INT64_MAX)) : 0;
    const int64_t max_range = in.env().limits.max_range;
    if (n > max_range) {
      throw RuntimeError("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                         std::to_string(max_range) + ").");
    }
    List out;
    out.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out.emplace_back(start + i * step);
    return Value::list(std::move(out));
  });
  env.globals["dict"] =
      Value::callable("dict", [](Interpreter&, CallArgs& args) { return Value::dict(dict_from_args("dict", args)); });
  env.globals["namespace"] = Value::callable("namespace", [](Interpreter&, CallArgs& args) {
    auto ns = std::make_shared<Object>();
    ns->type_name = "Namespace";
    ns->attrs = dict_from_args("namespace", args);
    return Value::object(ns);
  });
  env.globals["joiner"] = Value::callable("joiner", [](Interpreter&, CallArgs& args) {
    BoundArgs a("joiner", args, {"sep"});
    const Value sep = a.get_or(0, Value(", "));
    auto used = std::make_shared<bool>(false);
    return Value::callable("joiner", [sep, used](Interpreter&, CallArgs&) {
      if (!*used) {
        *used = true;
        return Value("");
      }
      return sep;
    });
  });
  for (const char* name : {"cycler", "lipsum"}) {
    const std::string n = name;
    env.globals[name] = Value::callable(n, [n](Interpreter&, CallArgs&) -> Value {
      throw RuntimeError("global '" + n + "' is not supported by ditto's template engine");
    });
  }
}

}  // namespace ditto::jinja
