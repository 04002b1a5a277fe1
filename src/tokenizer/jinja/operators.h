// Python's operators on template values, with Python's results and Python's TypeErrors:
// int/float arithmetic (true division, floor division and modulo rounding toward -inf), str and
// list concatenation and repetition, comparisons (chained in the interpreter), `in`, iteration,
// and slicing. Undefined operands raise jinja2's UndefinedError message. Integers are int64: an
// overflow raises instead of growing as Python's would.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

// Throws RuntimeError with the undefined value's hint ("'x' is undefined").
[[noreturn]] void throw_undefined(const Value& v);

// `max_size` bounds the length of any string or list an operator builds (memory guard).
Value binary_op(BinaryOp op, const Value& a, const Value& b, size_t max_size);
Value negate(const Value& a);
Value unary_plus(const Value& a);
// ==, !=, <, <=, >, >=, in, not in.
bool compare(CompareOp op, const Value& a, const Value& b);
// a < b as Python's sorted() needs it (numbers, strings, sequences lexicographically).
bool py_less(const Value& a, const Value& b);
bool py_contains(const Value& container, const Value& item);

// Python iteration: a list or tuple's items, a dict's keys, a string's characters, a generator's
// remaining items (consuming them); Undefined iterates as empty. Others raise "'int' object is
// not iterable".
List py_iterate(const Value& v);
// len(): strings in code points; Undefined is 0.
int64_t py_len(const Value& v);

// obj[start:stop:step] for strings, lists and tuples (absent parts as std::nullopt).
Value py_slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
               std::optional<int64_t> step);

// "'dict object'", "'None'": how jinja2 names an object in "has no attribute" messages.
std::string object_type_repr(const Value& v);

}  // namespace ditto::jinja
