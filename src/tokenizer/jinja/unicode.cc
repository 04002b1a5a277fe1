#include "tokenizer/jinja/unicode.h"

#include <utf8proc.h>

namespace ditto::jinja {

bool py_isspace(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return c >= 0x2000 && c <= 0x200A;
  }
}

bool py_isprintable(char32_t c) {
  if (c == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

bool py_isalpha(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return true;
    default: return false;
  }
}

bool py_isidentifier_continue(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_NL: return true;
    default: return py_isalpha(c);
  }
}

bool py_isdigit(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ND; }
bool py_isupper(char32_t c) { return utf8proc_isupper(static_cast<utf8proc_int32_t>(c)); }
bool py_islower(char32_t c) { return utf8proc_islower(static_cast<utf8proc_int32_t>(c)); }
char32_t py_toupper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t py_tolower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
char32_t py_totitle(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }

// The commonest of Unicode's unconditional special casings (SpecialCasing.txt), which Python's
// str.upper()/lower() apply and simple case mapping lacks.
const char* special_upper(char32_t c) {
  switch (c) {
    case 0x00DF: return "SS";  // ß
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05:
    case 0xFB06: return "ST";
    case 0x0149: return "\u02BCN";  // ŉ
    default: return nullptr;
  }
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8::to_utf32(s)) {
    if (c < 0x80) {
      out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    } else if (const char* special = special_upper(c)) {
      out += special;
    } else {
      utf8::append(out, py_toupper(c));
    }
  }
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8::to_utf32(s)) {
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (c == 0x0130) {
      out += "i\u0307";  // İ -> i + combining dot above
    } else {
      utf8::append(out, py_tolower(c));
    }
  }
  return out;
}

}  // namespace ditto::jinja
