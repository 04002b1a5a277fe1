#include "tokenizer/jinja/operators.h"

#include <cmath>
#include <limits>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/unicode.h"

namespace ditto::jinja {
namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kFloorDiv: return "//";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kPow: return "** or pow()";
    default: return "?";
  }
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::kAdd && a.is_string()) {
    throw RuntimeError(std::string("TypeError: can only concatenate str (not \"") + b.type_name() + "\") to str");
  }
  if (op == BinaryOp::kAdd && a.is_list()) {
    throw RuntimeError(std::string("TypeError: can only concatenate list (not \"") + b.type_name() + "\") to list");
  }
  throw RuntimeError(std::string("TypeError: unsupported operand type(s) for ") + op_symbol(op) + ": '" +
                     a.type_name() + "' and '" + b.type_name() + "'");
}

[[noreturn]] void overflow() {
  throw RuntimeError("OverflowError: integer result does not fit in 64 bits (ditto's integers are int64)");
}

[[noreturn]] void too_large(size_t max_size) {
  throw RuntimeError("MemoryError: result larger than the template output limit (" + std::to_string(max_size) +
                     " bytes)");
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1 && a == std::numeric_limits<int64_t>::min()) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Python's float_divmod.
void float_divmod(double vx, double wx, double* floordiv, double* mod) {
  double m = std::fmod(vx, wx);
  double div = (vx - m) / wx;
  if (m != 0.0) {
    if ((wx < 0) != (m < 0)) {
      m += wx;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, wx);
  }
  double fd;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod = m;
}

Value repeat(const Value& seq, int64_t n, size_t max_size) {
  if (n <= 0) return seq.is_string() ? Value(std::string()) : seq.is_tuple() ? Value::tuple({}) : Value::list({});
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > max_size / s.size()) too_large(max_size);
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const List& items = seq.as_list();
  if (!items.empty() && static_cast<uint64_t>(n) > max_size / items.size()) too_large(max_size);
  List out;
  out.reserve(items.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) throw RuntimeError("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    return Value(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return Value(result);
}

Value arithmetic(BinaryOp op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  if (!a.is_float() && !b.is_float() && op != BinaryOp::kDiv) {
    const int64_t x = a.to_int();
    const int64_t y = b.to_int();
    int64_t r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        if (__builtin_add_overflow(x, y, &r)) overflow();
        return Value(r);
      case BinaryOp::kSub:
        if (__builtin_sub_overflow(x, y, &r)) overflow();
        return Value(r);
      case BinaryOp::kMul:
        if (__builtin_mul_overflow(x, y, &r)) overflow();
        return Value(r);
      case BinaryOp::kFloorDiv:
        if (y == 0) throw RuntimeError("ZeroDivisionError: integer division or modulo by zero");
        return Value(floor_div(x, y));
      case BinaryOp::kMod:
        if (y == 0) throw RuntimeError("ZeroDivisionError: integer modulo by zero");
        return Value(floor_mod(x, y));
      case BinaryOp::kPow: return int_pow(x, y);
      default: break;
    }
  }
  const double x = a.to_double();
  const double y = b.to_double();
  switch (op) {
    case BinaryOp::kAdd: return Value(x + y);
    case BinaryOp::kSub: return Value(x - y);
    case BinaryOp::kMul: return Value(x * y);
    case BinaryOp::kDiv:
      if (y == 0) throw RuntimeError("ZeroDivisionError: division by zero");
      return Value(x / y);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) throw RuntimeError("ZeroDivisionError: float floor division by zero");
      double fd = 0, m = 0;
      float_divmod(x, y, &fd, &m);
      return Value(op == BinaryOp::kFloorDiv ? fd : m);
    }
    case BinaryOp::kPow:
      if (x == 0 && y < 0) throw RuntimeError("ZeroDivisionError: 0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) {
        throw RuntimeError("ValueError: negative number cannot be raised to a fractional power (complex result)");
      }
      if (const double r = std::pow(x, y); std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
        throw RuntimeError("OverflowError: (34, 'Numerical result out of range')");
      } else {
        return Value(r);
      }
    default: unsupported(op, a, b);
  }
}

bool sequence_less(const List& x, const List& y) {
  const size_t n = std::min(x.size(), y.size());
  for (size_t i = 0; i < n; ++i) {
    if (!py_equals(x[i], y[i])) return py_less(x[i], y[i]);
  }
  return x.size() < y.size();
}

[[noreturn]] void unorderable(const char* symbol, const Value& a, const Value& b) {
  throw RuntimeError(std::string("TypeError: '") + symbol + "' not supported between instances of '" + a.type_name() +
                     "' and '" + b.type_name() + "'");
}

// a <op> b for <, <=, >, >= (Python's rich comparison; no cross-type ordering).
bool order(CompareOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  const char* symbol = op == CompareOp::kLt ? "<" : op == CompareOp::kLtEq ? "<=" : op == CompareOp::kGt ? ">" : ">=";
  int cmp = 0;  // -1, 0, 1
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.to_double(), y = b.to_double();
      if (std::isnan(x) || std::isnan(y)) return false;
      cmp = x < y ? -1 : x > y ? 1 : 0;
    } else {
      const int64_t x = a.to_int(), y = b.to_int();
      cmp = x < y ? -1 : x > y ? 1 : 0;
    }
  } else if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    cmp = c < 0 ? -1 : c > 0 ? 1 : 0;
  } else if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    cmp = sequence_less(a.as_list(), b.as_list()) ? -1 : sequence_less(b.as_list(), a.as_list()) ? 1 : 0;
  } else {
    unorderable(symbol, a, b);
  }
  switch (op) {
    case CompareOp::kLt: return cmp < 0;
    case CompareOp::kLtEq: return cmp <= 0;
    case CompareOp::kGt: return cmp > 0;
    default: return cmp >= 0;
  }
}

// Python's slice.indices(length) then the selected positions.
std::vector<int64_t> slice_positions(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                     std::optional<int64_t> step_opt) {
  const int64_t step = step_opt.value_or(1);
  if (step == 0) throw RuntimeError("ValueError: slice step cannot be zero");
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t i = *v;
    if (i < 0) i += length;
    return std::clamp(i, lo, hi);
  };
  std::vector<int64_t> out;
  if (step > 0) {
    const int64_t b = adjust(start, 0, 0, length);
    const int64_t e = adjust(stop, length, 0, length);
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    const int64_t b = adjust(start, length - 1, -1, length - 1);
    const int64_t e = adjust(stop, -1, -1, length - 1);
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace

void throw_undefined(const Value& v) {
  throw RuntimeError(v.undefined_hint().empty() ? "UndefinedError: value is undefined" : v.undefined_hint());
}

Value binary_op(BinaryOp op, const Value& a, const Value& b, size_t max_size) {
  if (op == BinaryOp::kMod && a.is_string()) return Value(py_percent_format(a.as_string(), b));
  if (op != BinaryOp::kPow) {
    if (a.is_undefined()) throw_undefined(a);
    if (b.is_undefined()) throw_undefined(b);
  }
  if (op == BinaryOp::kAdd) {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > max_size) too_large(max_size);
      return Value(a.as_string() + b.as_string());
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
      if (a.as_list().size() + b.as_list().size() > max_size) too_large(max_size);
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return a.is_list() ? Value::list(std::move(out)) : Value::tuple(std::move(out));
    }
  }
  if (op == BinaryOp::kMul) {
    const bool a_seq = a.is_string() || a.is_sequence();
    const bool b_seq = b.is_string() || b.is_sequence();
    if (a_seq && (b.is_int() || b.is_bool())) return repeat(a, b.to_int(), max_size);
    if (b_seq && (a.is_int() || a.is_bool())) return repeat(b, a.to_int(), max_size);
  }
  return arithmetic(op, a, b);
}

Value negate(const Value& a) {
  if (a.is_undefined()) throw_undefined(a);
  if (a.is_float()) return Value(-a.as_float());
  if (a.is_int() || a.is_bool()) {
    const int64_t v = a.to_int();
    if (v == std::numeric_limits<int64_t>::min()) overflow();
    return Value(-v);
  }
  throw RuntimeError(std::string("TypeError: bad operand type for unary -: '") + a.type_name() + "'");
}

Value unary_plus(const Value& a) {
  if (a.is_undefined()) throw_undefined(a);
  if (a.is_float()) return a;
  if (a.is_int() || a.is_bool()) return Value(a.to_int());
  throw RuntimeError(std::string("TypeError: bad operand type for unary +: '") + a.type_name() + "'");
}

bool py_less(const Value& a, const Value& b) { return order(CompareOp::kLt, a, b); }

bool py_contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) throw_undefined(item);
        throw RuntimeError(std::string("TypeError: 'in <string>' requires string as left operand, not ") +
                           item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& v : container.as_list()) {
        if (py_equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (item.is_sequence() && item.is_list()) throw RuntimeError("TypeError: unhashable type: 'list'");
      if (item.is_dict()) throw RuntimeError("TypeError: unhashable type: 'dict'");
      return container.as_dict().find(item) != nullptr;
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kIterator: {
      for (const Value& v : py_iterate(container)) {
        if (py_equals(v, item)) return true;
      }
      return false;
    }
    default:
      throw RuntimeError(std::string("TypeError: argument of type '") + container.type_name() + "' is not iterable");
  }
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq: return py_equals(a, b);
    case CompareOp::kNe: return !py_equals(a, b);
    case CompareOp::kIn: return py_contains(b, a);
    case CompareOp::kNotIn: return !py_contains(b, a);
    default: return order(op, a, b);
  }
}

List py_iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kTuple: return v.as_list();
    case Value::Kind::kDict: {
      List keys;
      keys.reserve(v.as_dict().size());
      for (const auto& kv : v.as_dict().items()) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      std::string ch;
      for (char32_t c : utf8::to_utf32(v.as_string())) {
        ch.clear();
        utf8::append(ch, c);
        chars.emplace_back(ch);
      }
      return chars;
    }
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kIterator: {
      Iterator& it = v.as_iterator();
      List rest(it.items.begin() + static_cast<std::ptrdiff_t>(it.position), it.items.end());
      it.position = it.items.size();
      return rest;
    }
    default: throw RuntimeError(std::string("TypeError: '") + v.type_name() + "' object is not iterable");
  }
}

int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString: return static_cast<int64_t>(utf8::length(v.as_string()));
    case Value::Kind::kList:
    case Value::Kind::kTuple: return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.as_dict().size());
    case Value::Kind::kUndefined: return 0;
    default: throw RuntimeError(std::string("TypeError: object of type '") + v.type_name() + "' has no len()");
  }
}

Value py_slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
               std::optional<int64_t> step) {
  if (obj.is_string()) {
    const std::u32string s = utf8::to_utf32(obj.as_string());
    std::u32string out;
    for (int64_t i : slice_positions(static_cast<int64_t>(s.size()), start, stop, step)) {
      out.push_back(s[static_cast<size_t>(i)]);
    }
    return Value(utf8::from_utf32(out));
  }
  const List& items = obj.as_list();
  List out;
  for (int64_t i : slice_positions(static_cast<int64_t>(items.size()), start, stop, step)) {
    out.push_back(items[static_cast<size_t>(i)]);
  }
  return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "'None'";
  return std::string("'") + v.type_name() + " object'";
}

}  // namespace ditto::jinja
