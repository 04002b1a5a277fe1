#include "tokenizer/jinja/value.h"

#include <limits>

#include "core/error.h"

namespace ditto::jinja {

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items_) {
    if (py_equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items_) {
    if (py_equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  return Value(Kind::kCallable, std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)}));
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw_invalid_argument("integer " + std::to_string(u) + " is out of range (at most 2^63-1 is supported)");
      }
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.set(Value(k), from_json(v));
      return dict(std::move(d));
    }
    default: throw_invalid_argument("unsupported JSON value (binary or discarded)");
  }
}

double Value::to_double() const {
  switch (kind_) {
    case Kind::kBool: return as_bool() ? 1.0 : 0.0;
    case Kind::kInt: return static_cast<double>(as_int());
    default: return as_float();
  }
}

int64_t Value::to_int() const { return kind_ == Kind::kBool ? (as_bool() ? 1 : 0) : as_int(); }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return as_bool();
    case Kind::kInt: return as_int() != 0;
    case Kind::kFloat: return as_float() != 0.0;
    case Kind::kString: return !as_string().empty();
    case Kind::kList:
    case Kind::kTuple: return !as_list().empty();
    case Kind::kDict: return as_dict().size() != 0;
    case Kind::kObject:
    case Kind::kCallable:
    case Kind::kIterator: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kObject: return as_object().type_name.c_str();
    case Kind::kCallable: return "function";
    case Kind::kIterator: return as_iterator().type_name.c_str();
  }
  return "object";
}

bool Value::same_object(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kList:
    case Kind::kTuple:
      return std::get<std::shared_ptr<const List>>(data_) == std::get<std::shared_ptr<const List>>(other.data_);
    case Kind::kDict:
      return std::get<std::shared_ptr<const Dict>>(data_) == std::get<std::shared_ptr<const Dict>>(other.data_);
    case Kind::kObject:
      return std::get<std::shared_ptr<Object>>(data_) == std::get<std::shared_ptr<Object>>(other.data_);
    case Kind::kCallable:
      return std::get<std::shared_ptr<const Callable>>(data_) == std::get<std::shared_ptr<const Callable>>(other.data_);
    case Kind::kIterator:
      return std::get<std::shared_ptr<Iterator>>(data_) == std::get<std::shared_ptr<Iterator>>(other.data_);
    default: return false;
  }
}

bool py_equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    return a.to_int() == b.to_int();
  }
  if (a.kind() != b.kind()) {
    // A list never equals a tuple in Python.
    return false;
  }
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!py_equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.find(k);
        if (other == nullptr || !py_equals(v, *other)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

}  // namespace ditto::jinja
