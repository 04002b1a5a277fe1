#include "tokenizer/jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja/unicode.h"

namespace ditto::jinja {
namespace {

// End of s after removing trailing Python whitespace.
size_t rstrip_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    const char32_t c = utf8::decode(s, start, &len);
    if (start + len != end || !py_isspace(c)) break;
    end = start;
  }
  return end;
}

size_t skip_whitespace(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t len = 0;
    if (!py_isspace(utf8::decode(s, pos, &len))) break;
    pos += len;
  }
  return pos;
}

bool all_whitespace(std::string_view s) { return skip_whitespace(s, 0) == s.size(); }

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
// Python identifiers (what jinja2's name_re accepts): letters and "_" start, digits and marks continue.
bool is_name_start(char32_t c) {
  if (c < 0x80) return std::isalpha(static_cast<int>(c)) || c == '_';
  return py_isalpha(c);
}
bool is_name_char(char32_t c) {
  if (c < 0x80) return is_name_start(c) || is_digit(static_cast<char>(c));
  return py_isidentifier_continue(c);
}

struct OperatorSpelling {
  const char* text;
  TokenType type;
};
// Longest first, as jinja2 sorts its operator regex.
constexpr OperatorSpelling kOperators[] = {
    {"//", TokenType::kFloorDiv}, {"**", TokenType::kPow},      {"==", TokenType::kEq},    {"!=", TokenType::kNe},
    {">=", TokenType::kGtEq},     {"<=", TokenType::kLtEq},     {"+", TokenType::kAdd},    {"-", TokenType::kSub},
    {"/", TokenType::kDiv},       {"*", TokenType::kMul},       {"%", TokenType::kMod},    {"~", TokenType::kTilde},
    {"[", TokenType::kLBracket},  {"]", TokenType::kRBracket},  {"(", TokenType::kLParen}, {")", TokenType::kRParen},
    {"{", TokenType::kLBrace},    {"}", TokenType::kRBrace},    {">", TokenType::kGt},     {"<", TokenType::kLt},
    {"=", TokenType::kAssign},    {".", TokenType::kDot},       {":", TokenType::kColon},  {"|", TokenType::kPipe},
    {",", TokenType::kComma},     {";", TokenType::kSemicolon},
};

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options) : options_(options) {
    // Newlines normalised to "\n"; one trailing newline dropped (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!options_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    try {
      while (pos_ < src_.size()) lex_root();
    } catch (const LexError& e) {
      tokens_.push_back(Token{TokenType::kError, e.message, Value(), e.line});
      return std::move(tokens_);
    }
    // The end of the template reads as being on the last token's line, as in jinja2.
    tokens_.push_back(Token{TokenType::kEof, "", Value(), tokens_.empty() ? 1 : tokens_.back().line});
    return std::move(tokens_);
  }

 private:
  struct LexError {
    std::string message;
    int line;
  };

  [[noreturn]] void fail(const std::string& message) const { throw LexError{message, line_}; }

  void push(TokenType type, std::string text, Value number = Value()) {
    tokens_.push_back(Token{type, std::move(text), std::move(number), line_});
  }

  // Text up to the next tag, with that tag's whitespace control applied to it.
  void lex_root() {
    size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        tag = std::string::npos;
        break;
      }
      const char k = src_[tag + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++tag;
    }
    if (tag == std::string::npos) {
      emit_data(std::string_view(src_).substr(pos_));
      pos_ = src_.size();
      return;
    }
    const char kind = src_[tag + 1];
    const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
    std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
    const int text_lines = count_newlines(text);
    text = strip_before_tag(text, sign, kind != '{');
    emit_data(text);
    line_ += text_lines;
    pos_ = tag + 2 + (sign != 0 ? 1 : 0);
    line_starting_ = false;
    if (kind == '#') {
      lex_comment();
    } else if (kind == '%' && lex_raw()) {
      return;
    } else if (kind == '%') {
      push(TokenType::kBlockBegin, "{%");
      lex_tag(false);
    } else {
      push(TokenType::kVariableBegin, "{{");
      lex_tag(true);
    }
  }

  std::string_view strip_before_tag(std::string_view text, char sign, bool lstrip_applies) const {
    if (sign == '-') return text.substr(0, rstrip_end(text));
    if (sign != '+' && options_.lstrip_blocks && lstrip_applies) {
      const size_t nl = text.rfind('\n');
      const size_t line_start = nl == std::string_view::npos ? 0 : nl + 1;
      if ((line_start > 0 || line_starting_) && all_whitespace(text.substr(line_start))) {
        return text.substr(0, line_start);
      }
    }
    return text;
  }

  void emit_data(std::string_view text) {
    if (!text.empty()) push(TokenType::kData, std::string(text));
  }

  // After a block or comment end: "-" eats all following whitespace, else trim_blocks one "\n".
  void finish_tag_end(char sign, bool trim_newline) {
    const size_t start = pos_;
    if (sign == '-') {
      pos_ = skip_whitespace(src_, pos_);
    } else if (sign == 0 && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    const std::string_view consumed = std::string_view(src_).substr(start, pos_ - start);
    line_ += count_newlines(consumed);
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n' && pos_ > start;
  }

  void lex_comment() {
    // jinja2 quirk: "{#" with nothing after it ends the template silently.
    if (pos_ >= src_.size()) return;
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] != '#' || src_[i + 1] != '}') continue;
      const char sign = i > pos_ && (src_[i - 1] == '-' || src_[i - 1] == '+') ? src_[i - 1] : 0;
      line_ += count_newlines(std::string_view(src_).substr(pos_, i - pos_));
      pos_ = i + 2;
      finish_tag_end(sign, options_.trim_blocks);
      return;
    }
    fail("Missing end of comment tag");
  }

  // {% raw %}...{% endraw %}: the content is data. Returns false when the tag is not "raw".
  bool lex_raw() {
    size_t p = skip_whitespace(src_, pos_);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = skip_whitespace(src_, p + 3);
    char begin_sign = 0;
    if (src_.compare(p, 3, "-%}") == 0) {
      begin_sign = '-';
      p += 3;
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    const size_t tag_start = pos_;
    pos_ = p;
    line_ += count_newlines(std::string_view(src_).substr(tag_start, p - tag_start));
    if (begin_sign == '-') finish_tag_end('-', false);
    if (pos_ >= src_.size()) return true;  // jinja2 quirk: "{% raw %}" at the very end is accepted
    // Find {%[-+]?\s*endraw\s*(+%}|-%}|%}).
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t q = i + 2;
      const char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (sign != 0) ++q;
      q = skip_whitespace(src_, q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q = skip_whitespace(src_, q + 6);
      char end_sign = 0;
      if (src_.compare(q, 3, "+%}") == 0 || src_.compare(q, 3, "-%}") == 0) {
        end_sign = src_[q];
        q += 3;
      } else if (src_.compare(q, 2, "%}") == 0) {
        q += 2;
      } else {
        continue;
      }
      std::string_view text = std::string_view(src_).substr(pos_, i - pos_);
      const int text_lines = count_newlines(text);
      emit_data(strip_before_tag(text, sign, true));
      line_ += text_lines + count_newlines(std::string_view(src_).substr(i, q - i));
      pos_ = q;
      finish_tag_end(end_sign, options_.trim_blocks);
      return true;
    }
    fail("Missing end of raw directive");
  }

  // Expression tokens until "}}" / "%}" (only once brackets balance).
  void lex_tag(bool variable) {
    std::vector<char> balancing;
    while (pos_ < src_.size()) {
      if (balancing.empty() && try_tag_end(variable)) return;
      const char c = src_[pos_];
      size_t len = 0;
      if (py_isspace(utf8::decode(src_, pos_, &len))) {
        if (c == '\n') ++line_;
        pos_ += len;
        continue;
      }
      if (lex_number()) continue;
      if (is_name_start(utf8::decode(src_, pos_, &len))) {
        const size_t start = pos_;
        while (pos_ < src_.size() && is_name_char(utf8::decode(src_, pos_, &len))) pos_ += len;
        push(TokenType::kName, src_.substr(start, pos_ - start));
        continue;
      }
      if (c == '\'' || c == '"') {
        lex_string(c);
        continue;
      }
      lex_operator(balancing);
    }
  }

  bool try_tag_end(bool variable) {
    const char* close = variable ? "}}" : "%}";
    if (src_.compare(pos_, 2, close) == 0) {
      push(variable ? TokenType::kVariableEnd : TokenType::kBlockEnd, close);
      pos_ += 2;
      finish_tag_end(0, !variable && options_.trim_blocks);
      return true;
    }
    const char sign = src_[pos_];
    if ((sign == '-' || (sign == '+' && !variable)) && src_.compare(pos_ + 1, 2, close) == 0) {
      push(variable ? TokenType::kVariableEnd : TokenType::kBlockEnd, close);
      pos_ += 3;
      finish_tag_end(sign, false);
      return true;
    }
    return false;
  }

  // jinja2's float_re (tried first) and integer_re, with "_" digit separators.
  bool lex_number() {
    if (!is_digit(src_[pos_])) return false;
    if (pos_ > 0 && src_[pos_ - 1] == '.') {
      // float_re's (?<!\.): after a dot only an integer can start (x.0.1 is two subscripts).
    } else if (size_t end = match_float(pos_); end != 0) {
      std::string digits;
      for (size_t i = pos_; i < end; ++i) {
        if (src_[i] != '_') digits += src_[i];
      }
      push(TokenType::kFloat, digits, Value(std::strtod(digits.c_str(), nullptr)));
      pos_ = end;
      return true;
    }
    int base = 10;
    size_t p = pos_;
    if (src_[p] == '0' && p + 1 < src_.size() && std::strchr("bBoOxX", src_[p + 1]) != nullptr && src_[p + 1] != 0) {
      const char b = static_cast<char>(src_[p + 1] | 0x20);
      base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
      p += 2;
    }
    const size_t digits_start = p;
    std::string digits;
    while (p < src_.size()) {
      const char c = src_[p];
      const int d = is_digit(c) ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : 99;
      if (c == '_' && p + 1 < src_.size() && src_[p + 1] != '_') {
        ++p;
        continue;
      }
      if (d >= base) break;
      if (base == 10 && digits == "0" && c != '0') break;  // "0(_?0)*": 012 lexes as 0 then 12
      digits += c;
      ++p;
    }
    if (digits.empty()) {
      p = digits_start - 1;  // "0x" with no digits: just the 0
      digits += '0';         // (not `digits = "0"`: GCC 12 misreads that assign under -Wrestrict)
      base = 10;
    }
    errno = 0;
    const long long v = std::strtoll(digits.c_str(), nullptr, base);
    if (errno == ERANGE) fail("integer literal " + digits + " is too large (at most 2^63-1 is supported)");
    push(TokenType::kInteger, src_.substr(pos_, p - pos_), Value(static_cast<int64_t>(v)));
    pos_ = p;
    return true;
  }

  // End of a float literal at p, or 0: digits ( [.digits] e[+-]digits | .digits ).
  size_t match_float(size_t p) const {
    auto digits = [&](size_t q) {  // (\d+_)*\d+
      size_t end = 0;
      while (q < src_.size() && is_digit(src_[q])) {
        while (q < src_.size() && is_digit(src_[q])) ++q;
        end = q;
        if (q + 1 < src_.size() && src_[q] == '_' && is_digit(src_[q + 1])) ++q;
      }
      return end;
    };
    const size_t int_end = digits(p);
    auto exponent = [&](size_t q) -> size_t {
      if (q >= src_.size() || (src_[q] | 0x20) != 'e') return 0;
      ++q;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      return digits(q);
    };
    if (int_end < src_.size() && src_[int_end] == '.') {
      const size_t frac_end = digits(int_end + 1);
      if (frac_end != 0) {
        const size_t exp_end = exponent(frac_end);
        return exp_end != 0 ? exp_end : frac_end;
      }
    }
    return exponent(int_end);
  }

  // Python's unicode-escape decoding of the literal's body (jinja2 decodes strings that way).
  void lex_string(char quote) {
    const int start_line = line_;
    std::string out;
    size_t p = pos_ + 1;
    while (true) {
      if (p >= src_.size()) {
        line_ = start_line;
        fail(std::string("unterminated string literal (unexpected char '") + quote + "')");
      }
      const char c = src_[p];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) {
        line_ = start_line;
        fail(std::string("unterminated string literal (unexpected char '") + quote + "')");
      }
      p = unescape(p + 1, out);
    }
    tokens_.push_back(Token{TokenType::kString, std::move(out), Value(), start_line});
    pos_ = p + 1;
  }

  // Decodes the escape whose first character is src_[p]; returns the position after it.
  size_t unescape(size_t p, std::string& out) {
    const char c = src_[p];
    switch (c) {
      case '\n': ++line_; return p + 1;  // line continuation
      case '\\': out += '\\'; return p + 1;
      case '\'': out += '\''; return p + 1;
      case '"': out += '"'; return p + 1;
      case 'a': out += '\a'; return p + 1;
      case 'b': out += '\b'; return p + 1;
      case 'f': out += '\f'; return p + 1;
      case 'n': out += '\n'; return p + 1;
      case 'r': out += '\r'; return p + 1;
      case 't': out += '\t'; return p + 1;
      case 'v': out += '\v'; return p + 1;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t i = 1; i <= n; ++i) {
          const char h = p + i < src_.size() ? src_[p + i] : 0;
          const int d = is_digit(h) ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
          if (d < 0) fail(std::string("truncated \\") + c + std::string(n, 'X') + " escape in string literal");
          cp = cp * 16 + static_cast<uint32_t>(d);
        }
        if (cp > 0x10FFFF) fail("illegal Unicode character in string literal");
        utf8::append(out, static_cast<char32_t>(cp));
        return p + 1 + n;
      }
      case 'N': fail("\\N{...} escapes in string literals are not supported");
      default: break;
    }
    if (c >= '0' && c <= '7') {
      uint32_t cp = 0;
      size_t i = p;
      while (i < p + 3 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7') cp = cp * 8 + (src_[i++] - '0');
      utf8::append(out, static_cast<char32_t>(cp));
      return i;
    }
    if (static_cast<unsigned char>(c) >= 0x80) {
      // Python first turns the non-ASCII character into a \x / \u / \U escape, whose backslash
      // the literal's backslash then escapes: "\é" reads as the four characters \xe9.
      size_t len = 0;
      const char32_t cp = utf8::decode(src_, p, &len);
      char buf[16];
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      }
      out += buf;
      return p + len;
    }
    out += '\\';  // unknown escapes keep their backslash
    out += c;
    return p + 1;
  }

  void lex_operator(std::vector<char>& balancing) {
    for (const OperatorSpelling& op : kOperators) {
      const size_t n = std::strlen(op.text);
      if (src_.compare(pos_, n, op.text) != 0) continue;
      const char c = op.text[0];
      if (n == 1 && (c == '{' || c == '(' || c == '[')) {
        balancing.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
      } else if (n == 1 && (c == '}' || c == ')' || c == ']')) {
        if (balancing.empty()) fail(std::string("unexpected '") + c + "'");
        if (balancing.back() != c) fail(std::string("unexpected '") + c + "', expected '" + balancing.back() + "'");
        balancing.pop_back();
      }
      push(op.type, op.text);
      pos_ += n;
      return;
    }
    size_t len = 0;
    utf8::decode(src_, pos_, &len);
    fail("unexpected char '" + src_.substr(pos_, len) + "'");
  }

  std::string src_;
  LexerOptions options_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::string describe_token_type(TokenType type) {
  switch (type) {
    case TokenType::kData: return "template data / text";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kName: return "name";
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    case TokenType::kEof: return "end of template";
    default: break;
  }
  for (const OperatorSpelling& op : kOperators) {
    if (op.type == type) return op.text;
  }
  return "token";
}

std::string describe_token(const Token& token) {
  if (token.type == TokenType::kName) return token.text;
  return describe_token_type(token.type);
}

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace ditto::jinja
