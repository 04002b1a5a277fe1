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

// Well-formed sequences (Unicode Table 3-7): the total length a lead byte announces and the range
// its second byte must fall in; later bytes are always 80..BF. Returns 0 for a byte that cannot
// start a sequence (80..C1, F5..FF).
inline int expected_length(unsigned char lead, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) {
    if (lead == 0xE0) *lo = 0xA0;
    if (lead == 0xED) *hi = 0x9F;
    return 3;
  }
  if (lead < 0xF5) {
    if (lead == 0xF0) *lo = 0x90;
    if (lead == 0xF4) *hi = 0x8F;
    return 4;
  }
  return 0;
}

// The code point starting at s[i] (i < s.size()) and, in *len, its length in bytes. The one UTF-8
// decoder of the tree: a sequence that is not well-formed (Table 3-7: stray continuation bytes,
// overlong forms, surrogates, values past U+10FFFF, truncation) yields U+FFFD and length 1, as
// utf8proc_iterate() does.
inline char32_t decode(std::string_view s, size_t i, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  *len = 1;
  if (b0 < 0x80) return b0;
  unsigned char lo, hi;
  const int n = expected_length(b0, &lo, &hi);
  if (n == 0 || i + n > s.size()) return 0xFFFD;
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  if (b1 < lo || b1 > hi) return 0xFFFD;
  char32_t cp = (b0 & (0x7F >> n)) << 6 | (b1 & 0x3F);
  for (int k = 2; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < 0x80 || b > 0xBF) return 0xFFFD;
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = static_cast<size_t>(n);
  return cp;
}

// The code point starting at s[i]; advances i past it (by one byte, yielding U+FFFD, when the
// sequence there is not well-formed).
inline char32_t next(std::string_view s, size_t& i) {
  size_t len = 1;
  const char32_t cp = decode(s, i, &len);
  i += len;
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

// Number of code points of valid UTF-8 `s` (Python's len(str)): the bytes that are not 10xxxxxx.
inline size_t length(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Appends the UTF-8 encoding of `cp` (a Unicode scalar value) to `out`.
void append(std::string& out, char32_t cp);

// Every code point of `s` by decode() (so U+FFFD for each byte of an ill-formed sequence), and back.
std::u32string to_utf32(std::string_view s);
std::string from_utf32(std::u32string_view s);

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
