// The few Unicode properties Python's str methods depend on (isspace, upper/lower, isprintable),
// so that string operations in templates index, strip and case-map by code point exactly as Python
// does; UTF-8 itself is tokenizer/utf8.h (an ill-formed byte decodes to U+FFFD: Python never holds
// invalid UTF-8 in a str, so such input only reaches the interpreter from a malformed file). Case
// mapping and categories come from utf8proc (simple case mapping: Python's special cases such as
// "ß".upper() == "SS" are not reproduced).
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/utf8.h"

namespace ditto::jinja {

// Python str.isspace() for one code point.
bool py_isspace(char32_t c);
// Python str.isprintable() for one code point (repr() escapes the others).
bool py_isprintable(char32_t c);
bool py_isalpha(char32_t c);
bool py_isdigit(char32_t c);
// Beyond letters, what may continue a Python identifier: digits, combining marks, connectors.
bool py_isidentifier_continue(char32_t c);
bool py_isupper(char32_t c);
bool py_islower(char32_t c);
char32_t py_toupper(char32_t c);
char32_t py_tolower(char32_t c);
char32_t py_totitle(char32_t c);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);

}  // namespace ditto::jinja
