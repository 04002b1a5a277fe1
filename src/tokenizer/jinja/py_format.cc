#include "tokenizer/jinja/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace ditto::jinja {
namespace {

void append_hex(std::string& out, const char* prefix, uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%0*x", digits, value);
  out += prefix;
  out += buf;
}

void append_repr(std::string& out, const Value& v);

void append_sequence_repr(std::string& out, const List& items, bool tuple) {
  out += tuple ? '(' : '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    append_repr(out, items[i]);
  }
  if (tuple && items.size() == 1) out += ',';
  out += tuple ? ')' : ']';
}

void append_dict_repr(std::string& out, const Dict& d) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : d.items()) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k);
    out += ": ";
    append_repr(out, v);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: out += "Undefined"; return;
    case Value::Kind::kString: out += py_string_repr(v.as_string()); return;
    case Value::Kind::kList: append_sequence_repr(out, v.as_list(), false); return;
    case Value::Kind::kTuple: append_sequence_repr(out, v.as_list(), true); return;
    case Value::Kind::kDict: append_dict_repr(out, v.as_dict()); return;
    default: out += py_str(v); return;
  }
}

// json.dumps's short escapes; false for any other character.
bool append_short_escape(std::string& out, char32_t c) {
  switch (c) {
    case '"': out += "\\\""; return true;
    case '\\': out += "\\\\"; return true;
    case '\n': out += "\\n"; return true;
    case '\r': out += "\\r"; return true;
    case '\t': out += "\\t"; return true;
    case '\b': out += "\\b"; return true;
    case '\f': out += "\\f"; return true;
    default: return false;
  }
}

// json.dumps string encoding: py_encode_basestring(_ascii).
void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  if (!ensure_ascii) {
    for (unsigned char c : s) {
      if (append_short_escape(out, c)) continue;
      if (c < 0x20) {
        append_hex(out, "\\u", c, 4);
      } else {
        out += static_cast<char>(c);
      }
    }
  } else {
    for (char32_t c : utf8::to_utf32(s)) {
      if (append_short_escape(out, c)) continue;
      if (c >= 0x20 && c < 0x7F) {
        out += static_cast<char>(c);
      } else if (c < 0x10000) {
        append_hex(out, "\\u", c, 4);
      } else {
        const uint32_t u = c - 0x10000;
        append_hex(out, "\\u", 0xD800 | (u >> 10), 4);
        append_hex(out, "\\u", 0xDC00 | (u & 0x3FF), 4);
      }
    }
  }
  out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(f);
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString: return k.as_string();
    case Value::Kind::kBool: return k.as_bool() ? "true" : "false";
    case Value::Kind::kInt: return std::to_string(k.as_int());
    case Value::Kind::kFloat: return json_float(k.as_float());
    case Value::Kind::kNone: return "null";
    default:
      throw RuntimeError(std::string("TypeError: keys must be str, int, float, bool or None, not ") + k.type_name());
  }
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& o) : o_(o) {
    item_sep_ = o.item_separator ? *o.item_separator : (o.indent ? "," : ", ");
    key_sep_ = o.key_separator ? *o.key_separator : ": ";
  }

  void write(std::string& out, const Value& v, int level) {
    if (level > 512) throw RuntimeError("RecursionError: maximum recursion depth exceeded while encoding JSON");
    switch (v.kind()) {
      case Value::Kind::kNone: out += "null"; return;
      case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
      case Value::Kind::kFloat: out += json_float(v.as_float()); return;
      case Value::Kind::kString: append_json_string(out, v.as_string(), o_.ensure_ascii); return;
      case Value::Kind::kList:
      case Value::Kind::kTuple: write_list(out, v.as_list(), level); return;
      case Value::Kind::kDict: write_dict(out, v.as_dict(), level); return;
      default:
        throw RuntimeError(std::string("TypeError: Object of type ") + v.type_name() + " is not JSON serializable");
    }
  }

 private:
  void newline(std::string& out, int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  void write_list(std::string& out, const List& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep_;
      if (o_.indent) newline(out, level + 1);
      write(out, items[i], level + 1);
    }
    if (o_.indent) newline(out, level);
    out += ']';
  }

  void write_dict(std::string& out, const Dict& d, int level) {
    if (d.size() == 0) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& kv : d.items()) items.push_back(&kv);
    if (o_.sort_keys) sort_items(items);
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep_;
      if (o_.indent) newline(out, level + 1);
      append_json_string(out, json_key(items[i]->first), o_.ensure_ascii);
      out += key_sep_;
      write(out, items[i]->second, level + 1);
    }
    if (o_.indent) newline(out, level);
    out += '}';
  }

  static void sort_items(std::vector<const std::pair<Value, Value>*>& items) {
    const bool all_strings = std::all_of(items.begin(), items.end(), [](auto* kv) { return kv->first.is_string(); });
    const bool all_numbers = std::all_of(items.begin(), items.end(), [](auto* kv) { return kv->first.is_number(); });
    if (all_strings) {
      std::stable_sort(items.begin(), items.end(),
                       [](auto* a, auto* b) { return a->first.as_string() < b->first.as_string(); });
    } else if (all_numbers) {
      std::stable_sort(items.begin(), items.end(),
                       [](auto* a, auto* b) { return a->first.to_double() < b->first.to_double(); });
    } else {
      throw RuntimeError("TypeError: '<' not supported between dict keys of different types (sort_keys=True)");
    }
  }

  const JsonOptions& o_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

std::string py_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0.0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  // sci: [-]d[.ddd]e(+|-)XX, the shortest digits that round-trip.
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exp10 = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  const int decpt = exp10 + 1;  // value = 0.digits * 10^decpt
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += ebuf;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::string py_string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8::to_utf32(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      append_hex(out, "\\x", c, 2);
    } else if (c < 0x7F || py_isprintable(c)) {
      utf8::append(out, c);
    } else if (c < 0x100) {
      append_hex(out, "\\x", c, 2);
    } else if (c < 0x10000) {
      append_hex(out, "\\u", c, 4);
    } else {
      append_hex(out, "\\U", c, 8);
    }
  }
  out += quote;
  return out;
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return py_float_repr(v.as_float());
    case Value::Kind::kString: return v.as_string();
    case Value::Kind::kObject: {
      std::string out = "<" + v.as_object().type_name + " ";
      append_dict_repr(out, v.as_object().attrs);
      return out + ">";
    }
    case Value::Kind::kCallable: return "<function " + v.as_callable().name + ">";
    case Value::Kind::kIterator: return "<" + v.as_iterator().type_name + " object>";
    default: {
      std::string out;
      append_repr(out, v);
      return out;
    }
  }
}

std::string py_repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

namespace {

// The arguments of one %-format: a mapping (for %(key)s) or a run of positional values, consumed
// left to right by the conversions and by any '*' width or precision.
class PercentArgs {
 public:
  explicit PercentArgs(const Value& args)
      // Like CPython, any argument with __getitem__ other than a tuple or str (a dict, but also a list)
      // is taken as "the mapping": %(key)s looks into it and unused arguments are not an error.
      : args_(args),
        mapping_(args.is_dict() || args.is_list() || args.is_undefined()),
        positional_(args.is_tuple() ? args.as_list() : List{args}) {}

  Value take(const std::string& key, bool keyed) {
    if (keyed) {
      if (!args_.is_dict()) throw RuntimeError("TypeError: format requires a mapping");
      const Value* v = args_.as_dict().find(std::string_view(key));
      if (!v) throw RuntimeError("KeyError: '" + key + "'");
      return *v;
    }
    if (next_arg_ >= positional_.size()) throw RuntimeError("TypeError: not enough arguments for format string");
    return positional_[next_arg_++];
  }

  void check_all_converted() const {
    if (!mapping_ && next_arg_ < positional_.size()) {
      throw RuntimeError("TypeError: not all arguments converted during string formatting");
    }
  }

 private:
  const Value& args_;
  const bool mapping_;
  const List positional_;
  size_t next_arg_ = 0;
};

// One conversion specifier: %[(key)][flags][width][.precision][length]conv.
struct PercentSpec {
  std::string key;
  bool keyed = false;
  std::string flags;
  int width = 0;
  int precision = -1;  // -1: none given
  char conv = 0;
};

// Parses the specifier whose first character (after the '%') is fmt[i]; leaves i on the conversion
// character. A '*' width or precision takes its value from args here, before the converted value.
PercentSpec parse_percent_spec(const std::string& fmt, size_t& i, PercentArgs& args) {
  PercentSpec spec;
  if (fmt[i] == '(') {
    const size_t close = fmt.find(')', i);
    if (close == std::string::npos) throw RuntimeError("ValueError: incomplete format key");
    spec.key = fmt.substr(i + 1, close - i - 1);
    spec.keyed = true;
    i = close + 1;
  }
  while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) spec.flags += fmt[i++];
  if (i < fmt.size() && fmt[i] == '*') {
    spec.width = static_cast<int>(args.take("", false).to_int());
    ++i;
  }
  while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
    spec.width = std::min(spec.width * 10 + (fmt[i++] - '0'), 100000);
  }
  if (i < fmt.size() && fmt[i] == '.') {
    ++i;
    spec.precision = 0;
    if (i < fmt.size() && fmt[i] == '*') {
      spec.precision = static_cast<int>(args.take("", false).to_int());
      ++i;
    }
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
      spec.precision = std::min(spec.precision * 10 + (fmt[i++] - '0'), 1000);
    }
  }
  while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
  if (i >= fmt.size()) throw RuntimeError("ValueError: incomplete format");
  spec.conv = fmt[i];
  return spec;
}

// %c: a one-character string, or an int taken as a code point.
std::string format_percent_char(const Value& v) {
  std::string body;
  if (v.is_string() && utf8::length(v.as_string()) == 1) {
    body = v.as_string();
  } else if (v.is_int()) {
    utf8::append(body, static_cast<char32_t>(v.as_int()));
  } else {
    throw RuntimeError("TypeError: %c requires int or char");
  }
  return body;
}

// %d %i %u %x %X %o %e %E %f %F %g %G through snprintf. Only the '+', ' ' and '#' flags reach
// snprintf (padding is done afterwards, on code points); hex and octal print the magnitude after
// a '-', as Python does, rather than C's two's complement.
std::string format_percent_number(const PercentSpec& spec, const Value& v) {
  const char conv = spec.conv;
  if (!v.is_number()) {
    throw RuntimeError(std::string("TypeError: %") + conv + " format: a real number is required, not " + v.type_name());
  }
  std::string c_spec = "%";
  for (char f : spec.flags) {
    if (f == '+' || f == ' ' || f == '#') c_spec += f;
  }
  char buf[512];
  if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o') {
    const long long n = v.is_float() ? static_cast<long long>(v.as_float()) : static_cast<long long>(v.to_int());
    if (conv == 'x' || conv == 'X' || conv == 'o') {
      c_spec += std::string("ll") + conv;
      std::snprintf(buf, sizeof(buf), c_spec.c_str(), static_cast<unsigned long long>(n < 0 ? -n : n));
      std::string body = n < 0 ? "-" : "";
      return body + buf;
    }
    c_spec += "lld";
    std::snprintf(buf, sizeof(buf), c_spec.c_str(), n);
    return buf;
  }
  c_spec += '.';
  c_spec += std::to_string(spec.precision < 0 ? 6 : spec.precision);
  c_spec += conv;
  std::snprintf(buf, sizeof(buf), c_spec.c_str(), v.to_double());
  return buf;
}

// The converted value before padding; sets numeric for the conversions that honour the '0' flag.
std::string format_percent_value(const PercentSpec& spec, const Value& v, bool& numeric) {
  const char conv = spec.conv;
  switch (conv) {
    case 's':
    case 'r':
    case 'a': {
      std::string body = conv == 's' ? py_str(v) : py_repr(v);
      if (spec.precision >= 0) {
        body = utf8::from_utf32(utf8::to_utf32(body).substr(0, static_cast<size_t>(spec.precision)));
      }
      return body;
    }
    case 'c': return format_percent_char(v);
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      std::string body = format_percent_number(spec, v);
      numeric = true;
      return body;
    }
    default: throw RuntimeError(std::string("ValueError: unsupported format character '") + conv + "'");
  }
}

// Pads body to the width in code points: left-justified with '-', zero-filled after any sign for
// numbers with '0', right-justified otherwise.
void pad_percent_field(std::string& body, const PercentSpec& spec, bool numeric) {
  const int len = static_cast<int>(utf8::length(body));
  if (spec.width <= len) return;
  const std::string fill(static_cast<size_t>(spec.width - len), ' ');
  if (spec.flags.find('-') != std::string::npos) {
    body += fill;
  } else if (numeric && spec.flags.find('0') != std::string::npos) {
    const size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    body.insert(sign, std::string(static_cast<size_t>(spec.width - len), '0'));
  } else {
    body = fill + body;
  }
}

}  // namespace

std::string py_percent_format(const std::string& fmt, const Value& args) {
  PercentArgs arguments(args);
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw RuntimeError("ValueError: incomplete format");
    const PercentSpec spec = parse_percent_spec(fmt, i, arguments);
    if (spec.conv == '%') {
      out += '%';
      continue;
    }
    const Value v = arguments.take(spec.key, spec.keyed);
    bool numeric = false;
    std::string body = format_percent_value(spec, v, numeric);
    pad_percent_field(body, spec, numeric);
    out += body;
  }
  arguments.check_all_converted();
  return out;
}

std::string py_json_dumps(const Value& v, const JsonOptions& options) {
  std::string out;
  JsonWriter(options).write(out, v, 0);
  return out;
}

}  // namespace ditto::jinja
