// UTF-8 helpers for the tokenizer: decoding code points, validation, the lossy decode of Python's
// bytes.decode("utf-8", errors="replace") (one U+FFFD per maximal invalid subsequence, Unicode
// §3.9 "U+FFFD substitution of maximal subparts", which Rust's String::from_utf8_lossy and the
// WHATWG decoder follow too), a streaming version of it, and the two Unicode classes the added
// token rules need (White_Space, regex \w).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ditto::utf8 {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Byte length of the code point whose (valid) lead byte is `lead`.
inline int sequence_length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// The code point starting at s[i] (s must be valid UTF-8); advances i past it.
inline char32_t next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const int n = sequence_length(b0);
  char32_t cp = b0 & (0x7F >> n);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

// The code point ending just before s[i] (s valid UTF-8, i > 0); moves i to its first byte.
inline char32_t previous(std::string_view s, size_t& i) {
  size_t j = i - 1;
  while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
  size_t k = j;
  const char32_t cp = next(s, k);
  i = j;
  return cp;
}

// Appends the UTF-8 encoding of `cp` (a Unicode scalar value) to `out`.
void append(std::string& out, char32_t cp);

// Offset of the first byte of the first ill-formed sequence of `s`, or std::string_view::npos
// when `s` is well-formed UTF-8.
size_t find_invalid(std::string_view s);

// Python's bytes.decode("utf-8", errors="replace"): well-formed characters pass through, each
// maximal subpart of an ill-formed subsequence becomes one U+FFFD.
std::string decode_lossy(std::string_view bytes);

// The same decode, fed in pieces: the concatenation of every feed() and finish() output equals
// decode_lossy() of the concatenated input, whatever the piece boundaries. feed() emits only
// complete characters (and U+FFFD once a sequence is known to be ill-formed); the bytes of a
// character still incomplete wait for the next feed(). Not thread-safe (one stream per object).
class StreamDecoder {
 public:
  void feed(std::string_view bytes, std::string& out);
  // Flushes a trailing incomplete sequence as one U+FFFD and resets the stream.
  void finish(std::string& out);
  bool pending() const { return pending_len_ > 0; }

 private:
  unsigned char pending_[4] = {};
  int pending_len_ = 0;   // bytes of the current incomplete sequence held back
  int expected_len_ = 0;  // its total length
};

// Unicode White_Space (what Rust's regex `\s` matches, used by lstrip/rstrip of added tokens).
bool is_white_space(char32_t cp);

// Rust regex `\w` in Unicode mode: letters, marks, decimal digits, letter numbers, connector
// punctuation and the joiners U+200C/U+200D (used by single_word added tokens). Letters come from
// the general category L*, so the few Other_Alphabetic symbols (e.g. circled letters) are not
// word characters here.
bool is_word_char(char32_t cp);

}  // namespace ditto::utf8
