// Python's str methods, bound to their receiver, indexing by code point as Python does.
#include <algorithm>
#include <map>
#include <set>

#include "tokenizer/jinja/access.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/unicode.h"

namespace ditto::jinja {
namespace {

using Method = std::function<Value(const std::string& self, CallArgs& args)>;

// The method's arguments bound like Python's; a parameter not given is an Undefined (see given()).
std::vector<Value> bind(const std::string& method, CallArgs& args, std::initializer_list<const char*> params,
                        size_t required) {
  const BoundArgs bound("str." + method, args, params, required);
  std::vector<Value> out;
  for (size_t i = 0; i < params.size(); ++i) out.push_back(bound.get_or(i, Value::undefined("")));
  return out;
}

bool given(const Value& v) { return !v.is_undefined(); }

const std::string& str_arg(const Value& v, const std::string& method) {
  if (!v.is_string()) {
    throw RuntimeError("TypeError: str." + method + "() argument must be str, not " + std::string(v.type_name()));
  }
  return v.as_string();
}

int64_t int_arg(const Value& v, const std::string& method, int64_t dflt) {
  if (!given(v) || v.is_none()) return dflt;
  if (!v.is_int() && !v.is_bool()) {
    throw RuntimeError(std::string("TypeError: '") + v.type_name() +
                       "' object cannot be interpreted as an integer (str." + method + ")");
  }
  return v.to_int();
}

// s[start:end] per Python's optional start/end arguments, as code points.
std::u32string window(const std::string& s, const Value& start, const Value& end, const std::string& method,
                      int64_t* offset) {
  const std::u32string u = utf8::to_utf32(s);
  const int64_t n = static_cast<int64_t>(u.size());
  auto adjust = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
  const int64_t b = adjust(int_arg(start, method, 0));
  const int64_t e = adjust(int_arg(end, method, n));
  *offset = b;
  return e > b ? u.substr(static_cast<size_t>(b), static_cast<size_t>(e - b)) : std::u32string();
}

Value affix_test(const std::string& self, CallArgs& args, bool prefix) {
  const std::string method = prefix ? "startswith" : "endswith";
  const std::vector<Value> a = bind(method, args, {"prefix", "start", "end"}, 1);
  int64_t offset = 0;
  const std::string w = utf8::from_utf32(window(self, a[1], a[2], method, &offset));
  auto test = [&](const Value& v) {
    const std::string& x = str_arg(v, method);
    if (x.size() > w.size()) return false;
    return prefix ? w.compare(0, x.size(), x) == 0 : w.compare(w.size() - x.size(), x.size(), x) == 0;
  };
  if (a[0].is_tuple()) {
    for (const Value& v : a[0].as_list()) {
      if (test(v)) return Value(true);
    }
    return Value(false);
  }
  if (!a[0].is_string()) {
    throw RuntimeError("TypeError: " + method + " first arg must be str or a tuple of str, not " +
                       std::string(a[0].type_name()));
  }
  return Value(test(a[0]));
}

Value find(const std::string& self, CallArgs& args, const std::string& method, bool reverse, bool raise) {
  const std::vector<Value> a = bind(method, args, {"sub", "start", "end"}, 1);
  int64_t offset = 0;
  const std::u32string w = window(self, a[1], a[2], method, &offset);
  const std::u32string sub = utf8::to_utf32(str_arg(a[0], method));
  const size_t pos = reverse ? w.rfind(sub) : w.find(sub);
  if (pos == std::u32string::npos) {
    if (raise) throw RuntimeError("ValueError: substring not found");
    return Value(int64_t{-1});
  }
  return Value(offset + static_cast<int64_t>(pos));
}

Value pad(const std::string& self, CallArgs& args, const std::string& method) {
  const std::vector<Value> a = bind(method, args, {"width", "fillchar"}, 1);
  const int64_t width = int_arg(a[0], method, 0);
  std::string fill = " ";
  if (given(a[1])) {
    fill = str_arg(a[1], method);
    if (utf8::length(fill) != 1) throw RuntimeError("TypeError: The fill character must be exactly one character long");
  }
  const int64_t len = static_cast<int64_t>(utf8::length(self));
  if (width <= len) return Value(self);
  if (width > (int64_t{1} << 26)) throw RuntimeError("MemoryError: str." + method + "() width too large");
  const int64_t total = width - len;
  int64_t left = 0;
  if (method == "rjust") {
    left = total;
  } else if (method == "center") {
    left = total / 2 + (total & width & 1);  // CPython's str.center rounding
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += self;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value(out);
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  const std::u32string u = utf8::to_utf32(s);
  return !u.empty() && std::all_of(u.begin(), u.end(), pred);
}

Value format(const std::string& self, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < self.size(); ++i) {
    const char c = self[i];
    if (c == '}') {
      if (i + 1 < self.size() && self[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw RuntimeError("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < self.size() && self[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = self.find('}', i);
    if (close == std::string::npos) throw RuntimeError("ValueError: Single '{' encountered in format string");
    std::string field = self.substr(i + 1, close - i - 1);
    bool repr = false;
    if (field.size() >= 2 && field[field.size() - 2] == '!') {
      repr = field.back() == 'r';
      if (field.back() != 'r' && field.back() != 's') throw RuntimeError("ValueError: Unknown conversion specifier");
      field.resize(field.size() - 2);
    }
    if (field.find(':') != std::string::npos || field.find('.') != std::string::npos ||
        field.find('[') != std::string::npos) {
      throw RuntimeError("str.format(): format specs, attribute and index fields are not supported ('{" + field +
                         "}')");
    }
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = field.empty() ? auto_index++ : std::stoul(field);
      if (index >= args.args.size()) {
        throw RuntimeError("IndexError: Replacement index " + std::to_string(index) +
                           " out of range for positional "
                           "args tuple");
      }
      v = &args.args[index];
    } else {
      for (auto& [k, kv] : args.kwargs) {
        if (k == field) v = &kv;
      }
      if (v == nullptr) throw RuntimeError("KeyError: '" + field + "'");
    }
    out += repr ? py_repr(*v) : py_str(*v);
    i = close;
  }
  return Value(out);
}

const std::map<std::string, Method>& methods() {
  static const std::map<std::string, Method> kMethods = {
      {"startswith", [](const std::string& s, CallArgs& a) { return affix_test(s, a, true); }},
      {"endswith", [](const std::string& s, CallArgs& a) { return affix_test(s, a, false); }},
      {"strip", [](const std::string& s,
                   CallArgs& a) { return Value(py_strip(s, bind("strip", a, {"chars"}, 0)[0], true, true)); }},
      {"lstrip", [](const std::string& s,
                    CallArgs& a) { return Value(py_strip(s, bind("lstrip", a, {"chars"}, 0)[0], true, false)); }},
      {"rstrip", [](const std::string& s,
                    CallArgs& a) { return Value(py_strip(s, bind("rstrip", a, {"chars"}, 0)[0], false, true)); }},
      {"split",
       [](const std::string& s, CallArgs& a) {
         const auto v = bind("split", a, {"sep", "maxsplit"}, 0);
         return Value::list(py_split(s, v[0], int_arg(v[1], "split", -1), false));
       }},
      {"rsplit",
       [](const std::string& s, CallArgs& a) {
         const auto v = bind("rsplit", a, {"sep", "maxsplit"}, 0);
         return Value::list(py_split(s, v[0], int_arg(v[1], "rsplit", -1), true));
       }},
      {"upper",
       [](const std::string& s, CallArgs& a) {
         bind("upper", a, {}, 0);
         return Value(py_upper(s));
       }},
      {"lower",
       [](const std::string& s, CallArgs& a) {
         bind("lower", a, {}, 0);
         return Value(py_lower(s));
       }},
      {"casefold",
       [](const std::string& s, CallArgs& a) {
         bind("casefold", a, {}, 0);
         return Value(py_lower(s));
       }},
      {"title",
       [](const std::string& s, CallArgs& a) {
         bind("title", a, {}, 0);
         return Value(py_title(s));
       }},
      {"capitalize",
       [](const std::string& s, CallArgs& a) {
         bind("capitalize", a, {}, 0);
         return Value(py_capitalize(s));
       }},
      {"swapcase",
       [](const std::string& s, CallArgs& a) {
         bind("swapcase", a, {}, 0);
         std::string out;
         for (char32_t c : utf8::to_utf32(s))
           utf8::append(out, py_isupper(c) ? py_tolower(c) : py_islower(c) ? py_toupper(c) : c);
         return Value(out);
       }},
      {"replace",
       [](const std::string& s, CallArgs& a) {
         const auto v = bind("replace", a, {"old", "new", "count"}, 2);
         return Value(py_replace(s, str_arg(v[0], "replace"), str_arg(v[1], "replace"), int_arg(v[2], "replace", -1)));
       }},
      {"find", [](const std::string& s, CallArgs& a) { return find(s, a, "find", false, false); }},
      {"rfind", [](const std::string& s, CallArgs& a) { return find(s, a, "rfind", true, false); }},
      {"index", [](const std::string& s, CallArgs& a) { return find(s, a, "index", false, true); }},
      {"rindex", [](const std::string& s, CallArgs& a) { return find(s, a, "rindex", true, true); }},
      {"count",
       [](const std::string& s, CallArgs& a) {
         const auto v = bind("count", a, {"sub", "start", "end"}, 1);
         int64_t offset = 0;
         const std::u32string w = window(s, v[1], v[2], "count", &offset);
         const std::u32string sub = utf8::to_utf32(str_arg(v[0], "count"));
         if (sub.empty()) return Value(static_cast<int64_t>(w.size()) + 1);
         int64_t n = 0;
         for (size_t p = w.find(sub); p != std::u32string::npos; p = w.find(sub, p + sub.size())) ++n;
         return Value(n);
       }},
      {"join",
       [](const std::string& s, CallArgs& a) {
         const auto v = bind("join", a, {"iterable"}, 1);
         std::string out;
         size_t i = 0;
         for (const Value& item : py_iterate(v[0])) {
           if (!item.is_string()) {
             throw RuntimeError("TypeError: sequence item " + std::to_string(i) + ": expected str instance, " +
                                item.type_name() + " found");
           }
           if (i++ > 0) out += s;
           out += item.as_string();
         }
         return Value(out);
       }},
      {"format", [](const std::string& s, CallArgs& a) { return format(s, a); }},
      {"isdigit", [](const std::string& s, CallArgs&) { return Value(all_chars(s, py_isdigit)); }},
      {"isdecimal", [](const std::string& s, CallArgs&) { return Value(all_chars(s, py_isdigit)); }},
      {"isnumeric", [](const std::string& s, CallArgs&) { return Value(all_chars(s, py_isdigit)); }},
      {"isalpha", [](const std::string& s, CallArgs&) { return Value(all_chars(s, py_isalpha)); }},
      {"isalnum",
       [](const std::string& s, CallArgs&) {
         return Value(all_chars(s, [](char32_t c) { return py_isalpha(c) || py_isdigit(c); }));
       }},
      {"isspace", [](const std::string& s, CallArgs&) { return Value(all_chars(s, py_isspace)); }},
      {"isupper",
       [](const std::string& s, CallArgs&) {
         const std::u32string u = utf8::to_utf32(s);
         return Value(std::any_of(u.begin(), u.end(), py_isupper) && std::none_of(u.begin(), u.end(), py_islower));
       }},
      {"islower",
       [](const std::string& s, CallArgs&) {
         const std::u32string u = utf8::to_utf32(s);
         return Value(std::any_of(u.begin(), u.end(), py_islower) && std::none_of(u.begin(), u.end(), py_isupper));
       }},
      {"splitlines",
       [](const std::string& s, CallArgs& a) {
         const bool keepends = bind("splitlines", a, {"keepends"}, 0)[0].truthy();
         List out;
         const std::u32string u = utf8::to_utf32(s);
         size_t start = 0;
         for (size_t i = 0; i < u.size(); ++i) {
           const char32_t c = u[i];
           const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                            c == 0x85 || c == 0x2028 || c == 0x2029;
           if (!brk) continue;
           size_t end = i + 1;
           if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') end = i + 2;
           out.emplace_back(utf8::from_utf32(u.substr(start, (keepends ? end : i) - start)));
           start = end;
           i = end - 1;
         }
         if (start < u.size()) out.emplace_back(utf8::from_utf32(u.substr(start)));
         return Value::list(std::move(out));
       }},
      {"center", [](const std::string& s, CallArgs& a) { return pad(s, a, "center"); }},
      {"ljust", [](const std::string& s, CallArgs& a) { return pad(s, a, "ljust"); }},
      {"rjust", [](const std::string& s, CallArgs& a) { return pad(s, a, "rjust"); }},
      {"zfill",
       [](const std::string& s, CallArgs& a) {
         const int64_t width = int_arg(bind("zfill", a, {"width"}, 1)[0], "zfill", 0);
         const int64_t len = static_cast<int64_t>(utf8::length(s));
         if (width <= len) return Value(s);
         if (width > (int64_t{1} << 26)) throw RuntimeError("MemoryError: str.zfill() width too large");
         const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
         return Value(s.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') + s.substr(sign));
       }},
      {"removeprefix",
       [](const std::string& s, CallArgs& a) {
         const std::vector<Value> v = bind("removeprefix", a, {"prefix"}, 1);
         const std::string& p = str_arg(v[0], "removeprefix");
         return Value(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
       }},
      {"removesuffix",
       [](const std::string& s, CallArgs& a) {
         const std::vector<Value> v = bind("removesuffix", a, {"suffix"}, 1);
         const std::string& p = str_arg(v[0], "removesuffix");
         const bool has = !p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
         return Value(has ? s.substr(0, s.size() - p.size()) : s);
       }},
      {"partition",
       [](const std::string& s, CallArgs& a) {
         const std::vector<Value> v = bind("partition", a, {"sep"}, 1);
         const std::string& sep = str_arg(v[0], "partition");
         if (sep.empty()) throw RuntimeError("ValueError: empty separator");
         const size_t p = s.find(sep);
         if (p == std::string::npos) return Value::tuple({Value(s), Value(""), Value("")});
         return Value::tuple({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))});
       }},
      {"rpartition",
       [](const std::string& s, CallArgs& a) {
         const std::vector<Value> v = bind("rpartition", a, {"sep"}, 1);
         const std::string& sep = str_arg(v[0], "rpartition");
         if (sep.empty()) throw RuntimeError("ValueError: empty separator");
         const size_t p = s.rfind(sep);
         if (p == std::string::npos) return Value::tuple({Value(""), Value(""), Value(s)});
         return Value::tuple({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))});
       }},
  };
  return kMethods;
}

}  // namespace

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::u32string u = utf8::to_utf32(s);
  std::u32string set;
  const bool whitespace = chars.is_undefined() || chars.is_none();
  if (!whitespace) set = utf8::to_utf32(str_arg(chars, "strip"));
  auto strip_it = [&](char32_t c) { return whitespace ? py_isspace(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip_it(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(u[e - 1])) --e;
  }
  return utf8::from_utf32(u.substr(b, e - b));
}

List py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  List out;
  if (sep.is_undefined() || sep.is_none()) {
    // Runs of whitespace separate; no empty strings at the ends.
    const std::u32string u = utf8::to_utf32(s);
    std::vector<std::u32string> parts;
    if (!from_right) {
      size_t i = 0;
      while (true) {
        while (i < u.size() && py_isspace(u[i])) ++i;
        if (i >= u.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
          parts.push_back(u.substr(i));  // the remainder keeps its trailing whitespace
          break;
        }
        size_t j = i;
        while (j < u.size() && !py_isspace(u[j])) ++j;
        parts.push_back(u.substr(i, j - i));
        i = j;
      }
    } else {
      size_t i = u.size();
      while (true) {
        while (i > 0 && py_isspace(u[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
          parts.push_back(u.substr(0, i));  // the remainder keeps its leading whitespace
          break;
        }
        size_t j = i;
        while (j > 0 && !py_isspace(u[j - 1])) --j;
        parts.push_back(u.substr(j, i - j));
        i = j;
      }
      std::reverse(parts.begin(), parts.end());
    }
    for (const auto& p : parts) out.emplace_back(utf8::from_utf32(p));
    return out;
  }
  const std::string& d = str_arg(sep, from_right ? "rsplit" : "split");
  if (d.empty()) throw RuntimeError("ValueError: empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      const size_t p =
          (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) ? s.find(d, start) : std::string::npos;
      if (p == std::string::npos) {
        parts.push_back(s.substr(start));
        break;
      }
      parts.push_back(s.substr(start, p - start));
      start = p + d.size();
    }
  } else {
    size_t end = s.size();
    while (true) {
      const size_t p = (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) && end >= d.size()
                           ? s.rfind(d, end - d.size())
                           : std::string::npos;
      if (p == std::string::npos) {
        parts.push_back(s.substr(0, end));
        break;
      }
      parts.push_back(s.substr(p + d.size(), end - p - d.size()));
      end = p;
    }
    std::reverse(parts.begin(), parts.end());
  }
  for (auto& p : parts) out.emplace_back(std::move(p));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& replacement, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    const std::u32string u = utf8::to_utf32(s);
    int64_t done = 0;
    for (char32_t c : u) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      utf8::append(out, c);
    }
    if (count < 0 || done < count) out += replacement;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t p = s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += replacement;
    start = p + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string py_capitalize(const std::string& s) {
  const std::u32string u = utf8::to_utf32(s);
  std::string out;
  for (size_t i = 0; i < u.size(); ++i) utf8::append(out, i == 0 ? py_totitle(u[i]) : py_tolower(u[i]));
  return out;
}

std::string py_title(const std::string& s) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : utf8::to_utf32(s)) {
    utf8::append(out, previous_cased ? py_tolower(c) : py_totitle(c));
    previous_cased = py_isupper(c) || py_islower(c) || py_totitle(c) != py_toupper(c);
  }
  return out;
}

std::optional<Value> string_method(const std::string& s, const std::string& name) {
  static const std::set<std::string> kUnsupported = {"encode",  "expandtabs",   "format_map",
                                                     "isascii", "isidentifier", "isprintable",
                                                     "istitle", "maketrans",    "translate"};
  const auto& table = methods();
  const auto it = table.find(name);
  if (it != table.end()) {
    Method fn = it->second;
    return Value::callable("str." + name, [s, fn](Interpreter&, CallArgs& args) { return fn(s, args); });
  }
  if (kUnsupported.count(name)) {
    return Value::callable("str." + name, [name](Interpreter&, CallArgs&) -> Value {
      throw RuntimeError("str." + name + "() is not supported by ditto's template engine");
    });
  }
  return std::nullopt;
}

}  // namespace ditto::jinja
