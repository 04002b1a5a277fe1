#include "tokenizer/jinja/access.h"

#include <set>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/py_format.h"

namespace ditto::jinja {
namespace {

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(object_type_repr(obj) + " has no attribute '" + name + "'");
}

Value no_element(const Value& obj, const Value& key) {
  std::string type = object_type_repr(obj);
  if (type.size() >= 2 && type.front() == '\'') type = type.substr(1, type.size() - 2);
  return Value::undefined(type + " has no element " + py_repr(key));
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined("SecurityError: access to attribute '" + name + "' of '" + obj.type_name() +
                          "' object is unsafe.");
}

// Binds a method to its receiver; the receiver is captured by value (containers are shared).
Value bound(const Value& self, const std::string& name, std::function<Value(const Value&, CallArgs&)> fn) {
  return Value::callable(std::string(self.type_name()) + "." + name,
                         [self, fn = std::move(fn)](Interpreter&, CallArgs& args) { return fn(self, args); });
}

void expect_args(const CallArgs& args, const std::string& name, size_t min, size_t max) {
  if (!args.kwargs.empty()) throw RuntimeError("TypeError: " + name + "() takes no keyword arguments");
  if (args.args.size() < min || args.args.size() > max) {
    throw RuntimeError("TypeError: " + name + "() takes " +
                       (min == max ? "exactly " + std::to_string(min) : "at most " + std::to_string(max)) +
                       " argument(s) (" + std::to_string(args.args.size()) + " given)");
  }
}

std::optional<Value> dict_method(const Value& self, const std::string& name) {
  static const std::set<std::string> kMutating = {"clear", "pop", "popitem", "setdefault", "update"};
  if (kMutating.count(name)) return unsafe(self, name);
  if (name == "get") {
    return bound(self, name, [](const Value& d, CallArgs& args) {
      expect_args(args, "get", 1, 2);
      const Value* v = d.as_dict().find(args.args[0]);
      return v ? *v : args.args.size() > 1 ? args.args[1] : Value::none();
    });
  }
  if (name == "items") {
    return bound(self, name, [](const Value& d, CallArgs& args) {
      expect_args(args, "items", 0, 0);
      List out;
      for (const auto& [k, v] : d.as_dict().items()) out.push_back(Value::tuple({k, v}));
      return Value::list(std::move(out));
    });
  }
  if (name == "keys" || name == "values") {
    const bool keys = name == "keys";
    return bound(self, name, [keys](const Value& d, CallArgs& args) {
      expect_args(args, keys ? "keys" : "values", 0, 0);
      List out;
      for (const auto& [k, v] : d.as_dict().items()) out.push_back(keys ? k : v);
      return Value::list(std::move(out));
    });
  }
  if (name == "copy") {
    return bound(self, name, [](const Value& d, CallArgs& args) {
      expect_args(args, "copy", 0, 0);
      return Value::dict(d.as_dict());
    });
  }
  if (name == "fromkeys") {
    return bound(self, name,
                 [](const Value&, CallArgs&) -> Value { throw RuntimeError("dict.fromkeys() is not supported"); });
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  static const std::set<std::string> kMutating = {"append", "clear",  "extend",  "insert",
                                                  "pop",    "remove", "reverse", "sort"};
  if (self.is_list() && kMutating.count(name)) return unsafe(self, name);
  if (name == "count") {
    return bound(self, name, [](const Value& l, CallArgs& args) {
      expect_args(args, "count", 1, 1);
      int64_t n = 0;
      for (const Value& v : l.as_list()) n += py_equals(v, args.args[0]);
      return Value(n);
    });
  }
  if (name == "index") {
    return bound(self, name, [](const Value& l, CallArgs& args) {
      expect_args(args, "index", 1, 1);
      const List& items = l.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (py_equals(items[i], args.args[0])) return Value(static_cast<int64_t>(i));
      }
      throw RuntimeError(std::string("ValueError: ") +
                         (l.is_tuple() ? "tuple.index(x): x not in tuple" : "value is not in list"));
    });
  }
  if (name == "copy" && self.is_list()) {
    return bound(self, name, [](const Value& l, CallArgs& args) {
      expect_args(args, "copy", 0, 0);
      return Value::list(l.as_list());
    });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> python_attribute(const Value& obj, const std::string& name) {
  if (!name.empty() && name[0] == '_') return std::nullopt;  // the sandbox hides private attributes
  switch (obj.kind()) {
    case Value::Kind::kString: return string_method(obj.as_string(), name);
    case Value::Kind::kDict: return dict_method(obj, name);
    case Value::Kind::kList:
    case Value::Kind::kTuple: return list_method(obj, name);
    case Value::Kind::kObject: {
      const Value* v = obj.as_object().attrs.find(std::string_view(name));
      if (v) return *v;
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (std::optional<Value> attr = python_attribute(obj, name)) return *attr;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
  }
  return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw_undefined(obj);
  switch (obj.kind()) {
    case Value::Kind::kDict:
      if (!key.is_list() && !key.is_dict()) {
        if (const Value* v = obj.as_dict().find(key)) return *v;
      }
      break;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) {
        const int64_t n = py_len(obj);
        int64_t i = key.to_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return no_element(obj, key);
        if (!obj.is_string()) return obj.as_list()[static_cast<size_t>(i)];
        return py_slice(obj, i, i + 1, std::nullopt);
      }
      break;
    default: break;
  }
  if (key.is_string()) {
    if (std::optional<Value> attr = python_attribute(obj, key.as_string())) return *attr;
    return no_attribute(obj, key.as_string());
  }
  return no_element(obj, key);
}

}  // namespace ditto::jinja
