// Attribute and item access with the rules of jinja2's ImmutableSandboxedEnvironment:
//   x.name   tries the Python attribute first (so dict.items is the method, not a key "items"),
//            then x["name"]; x[key] tries the item first, then (for a string key) the attribute.
//   Missing ones give Undefined carrying jinja2's message; access on Undefined itself raises.
//   Methods that mutate (list.append, dict.update, ...) give an Undefined that raises
//   "access to attribute 'append' of 'list' object is unsafe." when called, as the sandbox does.
// The methods themselves (bound to their receiver) are Python's str, dict and list methods.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

Value get_attr(const Value& obj, const std::string& name);
// Only the Python attribute (a method, or a namespace / loop attribute): what jinja2's |attr sees.
std::optional<Value> python_attribute(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);

// The bound str method `name` of `s`, if Python's str has one (unimplemented ones raise when called).
std::optional<Value> string_method(const std::string& s, const std::string& name);

// Python str operations shared by methods and filters.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
List py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right);
std::string py_replace(const std::string& s, const std::string& old, const std::string& replacement, int64_t count);
std::string py_capitalize(const std::string& s);
std::string py_title(const std::string& s);

}  // namespace ditto::jinja
