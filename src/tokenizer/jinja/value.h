// The values a template computes with, modelled on the Python objects jinja2 sees when Hugging Face
// renders a chat template: None, bool, int, float, str, list, tuple, dict (insertion-ordered, as
// Python's), namespace / loop objects, callables, and jinja2's Undefined. JSON input converts to
// these exactly as json.loads would (objects keep their key order, so read JSON with
// nlohmann::ordered_json).
//
// Containers are shared and immutable once built (the sandbox forbids list.append and friends);
// only a namespace's attributes change, through {% set ns.attr = ... %}.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ditto::jinja {

class Value;
class Interpreter;
using List = std::vector<Value>;

// A Python dict: keys compare with Python equality (1 == 1.0 == True), iteration in insertion order.
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Replaces the value of an existing key in place (keeping its position), else appends.
  void set(Value key, Value value);
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const;  // defined below Value (a pair of incomplete Values has no size yet)

 private:
  std::vector<std::pair<Value, Value>> items_;
};

// An attribute bag: a namespace() (assignable) or a for loop's `loop` (read-only).
struct Object {
  std::string type_name;  // "Namespace", "LoopContext"
  Dict attrs;
};

// A Python generator: iterating it consumes it, later iterations see nothing. It is always true,
// and has no len() -- so `{% if xs|select(...) %}` behaves as it does in jinja2.
struct Iterator {
  std::string type_name;  // "generator", "list_reverseiterator"
  List items;
  size_t position = 0;
};

// Positional and keyword arguments of a call, as Python passes them.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

// Something a template can call: a global, a macro, a bound method. `fn` throws RuntimeError.
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kObject,
    kCallable,
    kIterator,  // a one-shot generator (what map/select/reject/reverse/items return in jinja2)
  };

  Value() : kind_(Kind::kUndefined), data_(std::string()) {}
  Value(bool b) : kind_(Kind::kBool), data_(b) {}
  Value(int i) : kind_(Kind::kInt), data_(int64_t{i}) {}
  Value(int64_t i) : kind_(Kind::kInt), data_(i) {}
  Value(double f) : kind_(Kind::kFloat), data_(f) {}
  Value(std::string s) : kind_(Kind::kString), data_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::kString), data_(std::string(s)) {}
  Value(std::string_view s) : kind_(Kind::kString), data_(std::string(s)) {}

  // An Undefined carrying the reason jinja2 would report when it is used ("'x' is undefined",
  // "'dict object' has no attribute 'y'").
  static Value undefined(std::string hint) { return Value(Kind::kUndefined, std::move(hint)); }
  static Value none() { return Value(Kind::kNone, std::monostate{}); }
  static Value list(List items) { return Value(Kind::kList, std::make_shared<const List>(std::move(items))); }
  static Value tuple(List items) { return Value(Kind::kTuple, std::make_shared<const List>(std::move(items))); }
  static Value dict(Dict d) { return Value(Kind::kDict, std::make_shared<const Dict>(std::move(d))); }
  static Value object(std::shared_ptr<Object> o) { return Value(Kind::kObject, std::move(o)); }
  static Value iterator(std::string type_name, List items) {
    return Value(Kind::kIterator, std::make_shared<Iterator>(Iterator{std::move(type_name), std::move(items), 0}));
  }
  static Value callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);

  // json.loads semantics; throws ditto::Error for integers beyond int64 (Python would keep them).
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's numbers.Number: bool, int, float.
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_iterator() const { return kind_ == Kind::kIterator; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  // bool, int or float as a double / bool or int as an int64 (Python's bool is an int).
  double to_double() const;
  int64_t to_int() const;
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  Iterator& as_iterator() const { return *std::get<std::shared_ptr<Iterator>>(data_); }
  const std::string& undefined_hint() const { return std::get<std::string>(data_); }
  // Python's `is` for containers, objects and callables (same shared instance).
  bool same_object(const Value& other) const;

  // Python's bool(x); Undefined is false.
  bool truthy() const;
  // Python's type(x).__name__: "str", "int", "NoneType", "dict", "Undefined", ...
  const char* type_name() const;

 private:
  using Data = std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<const List>,
                            std::shared_ptr<const Dict>, std::shared_ptr<Object>, std::shared_ptr<const Callable>,
                            std::shared_ptr<Iterator>>;
  Value(Kind kind, Data data) : kind_(kind), data_(std::move(data)) {}

  Kind kind_;
  Data data_;
};

inline size_t Dict::size() const { return items_.size(); }

// Python ==: numbers by value across bool/int/float, sequences and dicts element-wise, Undefined
// equal only to Undefined, callables and objects by identity.
bool py_equals(const Value& a, const Value& b);

}  // namespace ditto::jinja
