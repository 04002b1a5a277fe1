// jinja2's built-in filters (jinja2/filters.py), with the same arguments and the same results.
// Filters that return generators in jinja2 (map, select, reject, selectattr, rejectattr, unique,
// batch, slice, items, reverse of a sequence) return one-shot iterators here too.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "core/html_escape.h"
#include "tokenizer/jinja/access.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/environment.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/unicode.h"

namespace ditto::jinja {
namespace {

// make_attrgetter: "a.b.0" looks up a, then b, then item 0 (digit parts are integers).
Value lookup_path(const Value& item, const Value& attribute, const Value* dflt) {
  if (attribute.is_none() || attribute.is_undefined()) return item;
  if (!attribute.is_string()) return get_item(item, attribute);
  Value v = item;
  for (const Value& part : py_split(attribute.as_string(), Value("."), -1, false)) {
    const std::string& p = part.as_string();
    const bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, digits ? Value(static_cast<int64_t>(std::stoll(p))) : part);
    if (dflt && v.is_undefined()) v = *dflt;
  }
  return v;
}

Value ignore_case(const Value& v) { return v.is_string() ? Value(py_lower(v.as_string())) : v; }

// Python's int(str, base): optional sign, underscores between digits, surrounding whitespace.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = py_strip(text, Value::undefined(""), true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i - 1] != '_') continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  size_t start = digits[0] == '-' || digits[0] == '+' ? 1 : 0;
  if (base == 16 || base == 8 || base == 2) {
    const char p = base == 16 ? 'x' : base == 8 ? 'o' : 'b';
    if (digits.size() > start + 1 && digits[start] == '0' && (digits[start + 1] | 0x20) == p) {
      digits.erase(start, 2);
    }
  }
  if (digits.size() == start) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

// Python's float(str).
std::optional<double> parse_float(const std::string& text) {
  std::string s = py_strip(text, Value::undefined(""), true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  std::string lower = py_lower(s);
  const size_t sign = lower[0] == '-' || lower[0] == '+' ? 1 : 0;
  const std::string word = lower.substr(sign);
  if (word == "inf" || word == "infinity" || word == "nan") {
    const double v = word == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -v : v;
  }
  if (lower.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

Value sorted(Interpreter&, List items, bool reverse, bool case_sensitive, const Value& attribute) {
  std::vector<std::pair<Value, size_t>> keyed;
  const std::vector<Value> attrs =
      attribute.is_string() ? py_split(attribute.as_string(), Value(","), -1, false) : std::vector<Value>{attribute};
  for (size_t i = 0; i < items.size(); ++i) {
    List key;
    for (const Value& a : attrs) {
      Value k = lookup_path(items[i], a, nullptr);
      key.push_back(case_sensitive ? k : ignore_case(k));
    }
    keyed.emplace_back(key.size() == 1 ? key[0] : Value::list(std::move(key)), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  List out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value min_max(const Value& value, CallArgs& args, bool max) {
  BoundArgs a(max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const List items = py_iterate(value);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool cs = a.get_or(0, Value(false)).truthy();
  const Value attribute = a.get_or(1, Value::none());
  auto key = [&](const Value& v) {
    Value k = lookup_path(v, attribute, nullptr);
    return cs ? k : ignore_case(k);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (max ? py_less(best_key, k) : py_less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

// select / reject / selectattr / rejectattr.
Value select_or_reject(Interpreter& in, const Value& value, CallArgs& args, bool keep, bool lookup_attr) {
  List out;
  if (!value.truthy()) return Value::iterator("generator", {});
  size_t off = 0;
  Value attr;
  if (lookup_attr) {
    if (args.args.empty()) throw RuntimeError("FilterArgumentError: Missing parameter for attribute name");
    attr = args.args[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.args.size() > off) {
    test = string_argument(args.args[off], "select");
    test_args.args.assign(args.args.begin() + static_cast<std::ptrdiff_t>(off + 1), args.args.end());
    test_args.kwargs = args.kwargs;
  }
  for (const Value& item : py_iterate(value)) {
    const Value subject = lookup_attr ? lookup_path(item, attr, nullptr) : item;
    CallArgs call_args = test_args;
    const bool passed = test ? in.apply_test(*test, subject, call_args) : subject.truthy();
    if (passed == keep) out.push_back(item);
  }
  return Value::iterator("generator", std::move(out));
}

Value do_map(Interpreter& in, const Value& value, CallArgs& args) {
  List out;
  if (!value.truthy()) return Value::iterator("generator", {});
  const bool by_attribute = args.args.empty() && std::any_of(args.kwargs.begin(), args.kwargs.end(),
                                                             [](const auto& kv) { return kv.first == "attribute"; });
  if (by_attribute) {
    Value attribute, dflt = Value::none();
    for (auto& [k, v] : args.kwargs) {
      if (k == "attribute")
        attribute = v;
      else if (k == "default")
        dflt = v;
      else
        throw RuntimeError("FilterArgumentError: Unexpected keyword argument '" + k + "'");
    }
    for (const Value& item : py_iterate(value)) {
      out.push_back(lookup_path(item, attribute, dflt.is_none() ? nullptr : &dflt));
    }
  } else {
    if (args.args.empty()) throw RuntimeError("FilterArgumentError: map requires a filter argument");
    const std::string name = string_argument(args.args[0], "map");
    CallArgs filter_args;
    filter_args.args.assign(args.args.begin() + 1, args.args.end());
    filter_args.kwargs = args.kwargs;
    for (const Value& item : py_iterate(value)) {
      CallArgs call_args = filter_args;
      out.push_back(in.apply_filter(name, item, call_args));
    }
  }
  return Value::iterator("generator", std::move(out));
}

Value do_round(const Value& value, CallArgs& args) {
  BoundArgs a("round", args, {"precision", "method"});
  const int64_t precision = int_argument(a.get_or(0, Value(int64_t{0})), "round");
  const std::string method = a.has(1) ? string_argument(a.get(1), "round") : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    throw RuntimeError("FilterArgumentError: method must be common, ceil or floor");
  }
  if (!value.is_number()) {
    throw RuntimeError(std::string("TypeError: type ") + value.type_name() + " doesn't define __round__ method");
  }
  if (method == "common") {
    if (!value.is_float()) return Value(value.to_int());
    const double x = value.as_float();
    if (!std::isfinite(x) || precision > 300) return Value(x);
    if (precision >= 0) {
      // printf rounds the exact binary value half-to-even, as Python's round() does.
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
      return Value(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value(std::nearbyint(x / scale) * scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = value.to_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value do_truncate(const Value& value, CallArgs& args) {
  BoundArgs a("truncate", args, {"length", "killwords", "end", "leeway"});
  const int64_t length = int_argument(a.get_or(0, Value(int64_t{255})), "truncate");
  const bool killwords = a.get_or(1, Value(false)).truthy();
  const std::string end = a.has(2) ? string_argument(a.get(2), "truncate") : "...";
  const int64_t leeway = a.has(3) && !a.get(3).is_none() ? int_argument(a.get(3), "truncate") : 5;
  const auto end_len = static_cast<int64_t>(utf8::length(end));
  if (length < end_len) {
    throw RuntimeError("AssertionError: expected length >= " + std::to_string(end_len) + ", got " +
                       std::to_string(length));
  }
  if (leeway < 0) throw RuntimeError("AssertionError: expected leeway >= 0, got " + std::to_string(leeway));
  if (!value.is_string()) {
    // jinja2 measures len(value) and returns short values untouched; it cannot cut others.
    if (py_len(value) <= length + leeway) return value;
    throw RuntimeError(std::string("TypeError: truncate: cannot cut a '") + value.type_name() + "'");
  }
  const std::u32string s = utf8::to_utf32(value.as_string());
  if (static_cast<int64_t>(s.size()) <= length + leeway) return value;
  std::u32string head = s.substr(0, static_cast<size_t>(length - end_len));
  if (!killwords) {
    const size_t space = head.rfind(U' ');
    if (space != std::u32string::npos) head = head.substr(0, space);
  }
  return Value(utf8::from_utf32(head) + end);
}

Value do_tojson(const Value& value, CallArgs& args) {
  // jinja2's own tojson: json.dumps(sort_keys=True), then <, >, & and ' escaped for HTML.
  BoundArgs a("tojson", args, {"indent"});
  JsonOptions o;
  o.sort_keys = true;
  o.ensure_ascii = true;
  if (a.has(0) && !a.get(0).is_none()) {
    const Value& indent = a.get(0);
    o.indent = indent.is_string() ? indent.as_string()
                                  : std::string(static_cast<size_t>(std::max<int64_t>(0, indent.to_int())), ' ');
  }
  const std::string json = py_json_dumps(value, o);
  std::string out;
  for (char c : json) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      case '\'': out += "\\u0027"; break;
      default: out += c;
    }
  }
  return Value(out);
}

void add(Environment& env, const char* name, FilterFn fn) { env.filters[name] = std::move(fn); }

}  // namespace

void register_builtin_filters(Environment& env) {
  add(env, "abs", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("abs", args, {});
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    if (v.is_int() || v.is_bool()) return v.to_int() < 0 ? negate(v) : Value(v.to_int());
    throw RuntimeError(std::string("TypeError: bad operand type for abs(): '") + v.type_name() + "'");
  });
  add(env, "attr", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("attr", args, {"name"}, 1);
    const std::string& name = string_argument(a.get(0), "attr");
    if (v.is_undefined()) throw_undefined(v);
    if (std::optional<Value> attr = python_attribute(v, name)) return *attr;
    return Value::undefined(object_type_repr(v) + " has no attribute '" + name + "'");
  });
  add(env, "batch", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("batch", args, {"linecount", "fill_with"}, 1);
    const int64_t n = int_argument(a.get(0), "batch");
    if (n <= 0) throw RuntimeError("ValueError: batch size must be positive");
    List out, tmp;
    for (const Value& item : py_iterate(v)) {
      if (static_cast<int64_t>(tmp.size()) == n) out.push_back(Value::list(std::exchange(tmp, {})));
      tmp.push_back(item);
    }
    if (!tmp.empty()) {
      if (a.has(1) && !a.get(1).is_none()) {
        while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(a.get(1));
      }
      out.push_back(Value::list(std::move(tmp)));
    }
    return Value::iterator("generator", std::move(out));
  });
  add(env, "capitalize", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("capitalize", args, {});
    return Value(py_capitalize(py_str(v)));
  });
  add(env, "center", [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs a("center", args, {"width"});
    CallArgs method_args;
    method_args.args.push_back(a.get_or(0, Value(int64_t{80})));
    return in.call(*string_method(py_str(v), "center"), method_args);
  });
  const FilterFn length = [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("length", args, {});
    return Value(py_len(v));
  };
  add(env, "length", length);
  add(env, "count", length);
  const FilterFn default_filter = [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("default", args, {"default_value", "boolean"});
    const bool boolean = a.get_or(1, Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return a.get_or(0, Value(""));
    return v;
  };
  add(env, "default", default_filter);
  add(env, "d", default_filter);
  add(env, "dictsort", [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs a("dictsort", args, {"case_sensitive", "by", "reverse"});
    if (!v.is_dict())
      throw RuntimeError(std::string("AttributeError: '") + v.type_name() + "' object has no attribute 'items'");
    const std::string by = a.has(1) ? string_argument(a.get(1), "dictsort") : "key";
    if (by != "key" && by != "value")
      throw RuntimeError("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
    List pairs;
    for (const auto& [k, val] : v.as_dict().items()) pairs.push_back(Value::tuple({k, val}));
    return sorted(in, std::move(pairs), a.get_or(2, Value(false)).truthy(), a.get_or(0, Value(false)).truthy(),
                  Value(int64_t{by == "key" ? 0 : 1}));
  });
  const FilterFn escape = [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("escape", args, {});
    return Value(html_escape(py_str(v)));
  };
  add(env, "escape", escape);
  add(env, "e", escape);
  add(env, "forceescape", escape);
  add(env, "first", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("first", args, {});
    if (v.is_iterator()) {
      Iterator& it = v.as_iterator();
      if (it.position < it.items.size()) return it.items[it.position++];
    } else {
      const List items = py_iterate(v);
      if (!items.empty()) return items.front();
    }
    return Value::undefined("No first item, sequence was empty.");
  });
  add(env, "last", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("last", args, {});
    if (v.is_iterator()) throw RuntimeError("TypeError: 'generator' object is not reversible");
    const List items = py_iterate(v);
    if (!items.empty()) return items.back();
    return Value::undefined("No last item, sequence was empty.");
  });
  add(env, "float", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("float", args, {"default"});
    if (v.is_undefined()) throw_undefined(v);  // Undefined.__float__ raises
    if (v.is_number()) return Value(v.to_double());
    if (v.is_string()) {
      if (std::optional<double> f = parse_float(v.as_string())) return Value(*f);
    }
    return a.get_or(0, Value(0.0));
  });
  add(env, "int", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("int", args, {"default", "base"});
    const int64_t base = int_argument(a.get_or(1, Value(int64_t{10})), "int");
    if (v.is_undefined()) throw_undefined(v);  // Undefined.__int__ raises
    if (v.is_int() || v.is_bool()) return Value(v.to_int());
    if (v.is_float()) {
      const double f = v.as_float();
      if (std::isfinite(f) && std::fabs(f) < 9.2e18) return Value(static_cast<int64_t>(f));
    } else if (v.is_string()) {
      if (std::optional<int64_t> i = parse_int(v.as_string(), static_cast<int>(base))) return Value(*i);
      if (std::optional<double> f = parse_float(v.as_string()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) {
        return Value(static_cast<int64_t>(*f));
      }
    }
    return a.get_or(0, Value(int64_t{0}));
  });
  add(env, "format", [](Interpreter&, const Value& v, CallArgs& args) {
    if (!args.args.empty() && !args.kwargs.empty()) {
      throw RuntimeError("FilterArgumentError: can't handle positional and keyword arguments at the same time");
    }
    Dict kwargs;
    for (auto& [k, val] : args.kwargs) kwargs.set(Value(k), val);
    return Value(py_percent_format(py_str(v), args.kwargs.empty() ? Value::tuple(args.args) : Value::dict(kwargs)));
  });
  add(env, "indent", [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs a("indent", args, {"width", "first", "blank"});
    if (!v.is_string()) {
      if (v.is_undefined()) throw_undefined(v);
      throw RuntimeError(std::string("TypeError: unsupported operand type(s) for +=: '") + v.type_name() +
                         "' and 'str' (indent expects a string)");
    }
    const Value width = a.get_or(0, Value(int64_t{4}));
    const std::string indention = width.is_string()
                                      ? width.as_string()
                                      : std::string(static_cast<size_t>(std::max<int64_t>(0, width.to_int())), ' ');
    CallArgs no_args;
    const List lines = in.call(*string_method(py_str(v) + "\n", "splitlines"), no_args).as_list();
    std::string rv;
    if (a.get_or(2, Value(false)).truthy()) {
      for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i].as_string();
    } else {
      for (size_t i = 0; i < lines.size(); ++i) {
        const std::string& line = lines[i].as_string();
        if (i == 0) {
          rv = line;
        } else {
          rv += "\n" + (line.empty() ? line : indention + line);
        }
      }
    }
    if (a.get_or(1, Value(false)).truthy()) rv = indention + rv;
    return Value(rv);
  });
  add(env, "items", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("items", args, {});
    if (v.is_undefined()) return Value::iterator("generator", {});
    if (!v.is_dict()) throw RuntimeError("TypeError: Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, val] : v.as_dict().items()) out.push_back(Value::tuple({k, val}));
    return Value::iterator("generator", std::move(out));
  });
  add(env, "join", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("join", args, {"d", "attribute"});
    const std::string sep = py_str(a.get_or(0, Value("")));
    const Value attribute = a.get_or(1, Value::none());
    std::string out;
    bool first = true;
    for (const Value& item : py_iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += py_str(lookup_path(item, attribute, nullptr));
    }
    return Value(out);
  });
  add(env, "list", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("list", args, {});
    return Value::list(py_iterate(v));
  });
  add(env, "lower", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("lower", args, {});
    return Value(py_lower(py_str(v)));
  });
  add(env, "upper", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("upper", args, {});
    return Value(py_upper(py_str(v)));
  });
  add(env, "map", do_map);
  add(env, "max", [](Interpreter&, const Value& v, CallArgs& args) { return min_max(v, args, true); });
  add(env, "min", [](Interpreter&, const Value& v, CallArgs& args) { return min_max(v, args, false); });
  add(env, "select",
      [](Interpreter& in, const Value& v, CallArgs& args) { return select_or_reject(in, v, args, true, false); });
  add(env, "reject",
      [](Interpreter& in, const Value& v, CallArgs& args) { return select_or_reject(in, v, args, false, false); });
  add(env, "selectattr",
      [](Interpreter& in, const Value& v, CallArgs& args) { return select_or_reject(in, v, args, true, true); });
  add(env, "rejectattr",
      [](Interpreter& in, const Value& v, CallArgs& args) { return select_or_reject(in, v, args, false, true); });
  add(env, "replace", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("replace", args, {"old", "new", "count"}, 2);
    const int64_t count = a.has(2) && !a.get(2).is_none() ? int_argument(a.get(2), "replace") : -1;
    return Value(py_replace(py_str(v), py_str(a.get(0)), py_str(a.get(1)), count));
  });
  add(env, "reverse", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("reverse", args, {});
    if (v.is_string()) return py_slice(v, std::nullopt, std::nullopt, int64_t{-1});
    // reversed(Undefined) is empty: Undefined has len() 0.
    List items = py_iterate(v);
    std::reverse(items.begin(), items.end());
    if (v.is_iterator()) return Value::list(std::move(items));
    return Value::iterator(v.is_dict() ? "dict_reversekeyiterator" : "list_reverseiterator", std::move(items));
  });
  add(env, "round", [](Interpreter&, const Value& v, CallArgs& args) { return do_round(v, args); });
  const FilterFn identity_string = [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("safe", args, {});
    return v.is_string() ? v : Value(py_str(v));
  };
  add(env, "safe", identity_string);
  add(env, "string", identity_string);
  add(env, "slice", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("slice", args, {"slices", "fill_with"}, 1);
    const List seq = py_iterate(v);
    const int64_t slices = int_argument(a.get(0), "slice");
    if (slices <= 0) throw RuntimeError("ZeroDivisionError: integer division or modulo by zero");
    const auto length = static_cast<int64_t>(seq.size());
    const int64_t per = length / slices, extra = length % slices;
    int64_t offset = 0;
    List out;
    for (int64_t n = 0; n < slices; ++n) {
      const int64_t start = offset + n * per;
      if (n < extra) ++offset;
      const int64_t end = offset + (n + 1) * per;
      List tmp(seq.begin() + start, seq.begin() + end);
      if (a.has(1) && !a.get(1).is_none() && n >= extra) tmp.push_back(a.get(1));
      out.push_back(Value::list(std::move(tmp)));
    }
    return Value::iterator("generator", std::move(out));
  });
  add(env, "sort", [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs a("sort", args, {"reverse", "case_sensitive", "attribute"});
    return sorted(in, py_iterate(v), a.get_or(0, Value(false)).truthy(), a.get_or(1, Value(false)).truthy(),
                  a.get_or(2, Value::none()));
  });
  add(env, "sum", [](Interpreter& in, const Value& v, CallArgs& args) {
    BoundArgs a("sum", args, {"attribute", "start"});
    Value total = a.get_or(1, Value(int64_t{0}));
    const Value attribute = a.get_or(0, Value::none());
    for (const Value& item : py_iterate(v)) {
      total = binary_op(BinaryOp::kAdd, total, lookup_path(item, attribute, nullptr), in.max_size());
    }
    return total;
  });
  add(env, "title", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("title", args, {});
    // jinja2 splits on runs of [-\s({\[<] and upper-cases each piece's first character.
    const std::u32string s = utf8::to_utf32(py_str(v));
    auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
    std::string out;
    bool at_start = true;
    for (char32_t c : s) {
      if (is_sep(c)) {
        utf8::append(out, c);
        at_start = true;
      } else {
        utf8::append(out, at_start ? py_toupper(c) : py_tolower(c));
        at_start = false;
      }
    }
    return Value(out);
  });
  add(env, "tojson", [](Interpreter&, const Value& v, CallArgs& args) { return do_tojson(v, args); });
  add(env, "trim", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("trim", args, {"chars"});
    return Value(py_strip(py_str(v), a.get_or(0, Value::none()), true, true));
  });
  add(env, "truncate", [](Interpreter&, const Value& v, CallArgs& args) { return do_truncate(v, args); });
  add(env, "unique", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs a("unique", args, {"case_sensitive", "attribute"});
    const bool cs = a.get_or(0, Value(false)).truthy();
    const Value attribute = a.get_or(1, Value::none());
    List out, seen;
    for (const Value& item : py_iterate(v)) {
      Value key = lookup_path(item, attribute, nullptr);
      if (key.is_list() || key.is_dict()) {
        throw RuntimeError(std::string("TypeError: unhashable type: '") + key.type_name() + "'");
      }
      if (!cs) key = ignore_case(key);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equals(s, key); })) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::iterator("generator", std::move(out));
  });
  add(env, "wordcount", [](Interpreter&, const Value& v, CallArgs& args) {
    BoundArgs("wordcount", args, {});
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : utf8::to_utf32(py_str(v))) {
      const bool w = c == '_' || py_isalpha(c) || py_isdigit(c);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  });
  for (const char* name :
       {"filesizeformat", "groupby", "pprint", "random", "striptags", "urlencode", "urlize", "wordwrap", "xmlattr"}) {
    const std::string n = name;
    add(env, name, [n](Interpreter&, const Value&, CallArgs&) -> Value {
      throw RuntimeError("filter '" + n + "' is not supported by ditto's template engine");
    });
  }
}

}  // namespace ditto::jinja
