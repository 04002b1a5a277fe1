// UTF-8 helpers: the lossy decode against Python's bytes.decode("utf-8", errors="replace"), the
// streaming decoder against the whole decode, and the whitespace class against PCRE2's \s.
#include "tokenizer/utf8.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace ditto {
namespace {

struct LossyCase {
  std::string bytes;
  std::string expected;
};

// Expected values computed with Python 3.11: bytes.decode("utf-8", errors="replace").
const std::vector<LossyCase>& lossy_cases() {
  static const std::vector<LossyCase> cases = {
      {std::string("\x80", 1), "\xef\xbf\xbd"},
      {std::string("a\x80"
                   "b",
                   3),
       "a\xef\xbf\xbd"
       "b"},
      {std::string("\xc3", 1), "\xef\xbf\xbd"},
      {std::string("\xc3"
                   "a",
                   2),
       "\xef\xbf\xbd"
       "a"},
      {std::string("\xe2\x82", 2), "\xef\xbf\xbd"},
      {std::string("\xe2\x82"
                   "a",
                   3),
       "\xef\xbf\xbd"
       "a"},
      {std::string("\xf0\x9f\x98", 3), "\xef\xbf\xbd"},
      {std::string("\xf0\x9f\x98"
                   "a",
                   4),
       "\xef\xbf\xbd"
       "a"},
      {std::string("\xc0\xaf", 2), "\xef\xbf\xbd\xef\xbf\xbd"},
      {std::string("\xe0\x80\xaf", 3), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {std::string("\xed\xa0\x80", 3), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {std::string("\xf4\x90\x80\x80", 4), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {std::string("\xf5\x80", 2), "\xef\xbf\xbd\xef\xbf\xbd"},
      {std::string("\xff\xfe", 2), "\xef\xbf\xbd\xef\xbf\xbd"},
      {std::string("\xe2\x82\xac\x80", 4), "\xe2\x82\xac\xef\xbf\xbd"},
      {std::string("\xe2\xe2\x82\xac", 4), "\xef\xbf\xbd\xe2\x82\xac"},
      {std::string("\xf0\x9f\x98\x80\xf0\x9f", 6), "\xf0\x9f\x98\x80\xef\xbf\xbd"},
      {std::string("\xe1\x80\xe1\x80", 4), "\xef\xbf\xbd\xef\xbf\xbd"},
      {std::string("\xc2\x80\xc2", 3), "\xc2\x80\xef\xbf\xbd"},
      {std::string("\xef\xbf\xbd", 3), "\xef\xbf\xbd"},
      {std::string("\xf8\x88\x80\x80\x80", 5), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {std::string("caf\xc3", 4), "caf\xef\xbf\xbd"},
      {std::string("\xe4\xb8\xad\xe6\x96", 5), "\xe4\xb8\xad\xef\xbf\xbd"},
  };
  return cases;
}

TEST(Utf8Test, DecodeLossyMatchesPythonReplace) {
  for (const LossyCase& c : lossy_cases()) EXPECT_EQ(utf8::decode_lossy(c.bytes), c.expected) << c.bytes.size();
}

TEST(Utf8Test, FindInvalid) {
  EXPECT_EQ(utf8::find_invalid("plain ascii"), std::string_view::npos);
  EXPECT_EQ(utf8::find_invalid("\xe4\xb8\xad\xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(utf8::find_invalid(std::string("ab\xc3", 3)), 2u);
  EXPECT_EQ(utf8::find_invalid(std::string("\xed\xa0\x80", 3)), 0u);  // a surrogate
  EXPECT_EQ(utf8::find_invalid(std::string("a\xc0\xaf", 3)), 1u);     // overlong
}

// Feeding any split of the bytes gives the whole decode; every piece is valid UTF-8.
// decode() against utf8proc_iterate (U+FFFD and one byte on its error), on every 1- and 2-byte
// string, every lead byte with every second byte and random tails, and random byte strings.
TEST(Utf8Test, DecodeMatchesUtf8procIterate) {
  auto reference = [](std::string_view s) {
    std::u32string out;
    for (size_t i = 0; i < s.size();) {
      utf8proc_int32_t c = 0;
      const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                                  static_cast<utf8proc_ssize_t>(s.size() - i), &c);
      out.push_back(n <= 0 ? char32_t{0xFFFD} : static_cast<char32_t>(c));
      i += n <= 0 ? 1 : static_cast<size_t>(n);
    }
    return out;
  };
  std::mt19937 rng(11);
  std::vector<std::string> inputs;
  for (int a = 0; a < 256; ++a) {
    inputs.emplace_back(1, static_cast<char>(a));
    for (int b = 0; b < 256; ++b) {
      const std::string two{static_cast<char>(a), static_cast<char>(b)};
      inputs.push_back(two);
      if (a >= 0xE0)
        inputs.push_back(two + static_cast<char>(0x80 + rng() % 64) + static_cast<char>(0x80 + rng() % 64));
    }
  }
  for (int k = 0; k < 20000; ++k) {
    std::string s(1 + rng() % 8, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 128 : 0x80 + rng() % 128);
    inputs.push_back(s);
  }
  for (const std::string& s : inputs) {
    ASSERT_EQ(utf8::to_utf32(s), reference(s)) << ::testing::PrintToString(s);
    if (utf8::find_invalid(s) == std::string_view::npos) {
      ASSERT_EQ(utf8::from_utf32(utf8::to_utf32(s)), s);
    }
  }
}

TEST(Utf8Test, StreamDecoderMatchesWholeDecodeForEverySplit) {
  std::mt19937 rng(7);
  std::vector<std::string> inputs;
  for (const LossyCase& c : lossy_cases()) inputs.push_back(c.bytes);
  std::string all;
  for (const LossyCase& c : lossy_cases()) all += c.bytes;
  inputs.push_back(all);
  for (int k = 0; k < 300; ++k) {  // random bytes biased to lead/continuation bytes
    std::string s;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) {
      const unsigned r = rng() % 4;
      s.push_back(static_cast<char>(r == 0 ? 'a' + rng() % 3 : r == 1 ? 0x80 + rng() % 64 : 0xC0 + rng() % 64));
    }
    inputs.push_back(s);
  }
  for (const std::string& in : inputs) {
    for (int trial = 0; trial < 8; ++trial) {
      utf8::StreamDecoder decoder;
      std::string out;
      size_t i = 0;
      while (i < in.size()) {
        const size_t len = std::min<size_t>(in.size() - i, 1 + rng() % 3);
        std::string piece;
        decoder.feed(std::string_view(in).substr(i, len), piece);
        EXPECT_EQ(utf8::find_invalid(piece), std::string_view::npos);
        out += piece;
        i += len;
      }
      decoder.finish(out);
      EXPECT_EQ(out, utf8::decode_lossy(in));
    }
  }
}

// The added-token rules use Unicode White_Space (Rust regex \s); the pre-tokenizer regexes use
// PCRE2's \s with UCP. Hugging Face's Oniguruma \s is White_Space too, so the two must agree
// (PCRE2 alone also counts U+180E, which Regex::find_all hides from it).
TEST(Utf8Test, WhiteSpaceIsPcre2UnicodeSpace) {
  const Regex space("\\s", "test");
  std::vector<MatchSpan> matches;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    std::string s;
    utf8::append(s, cp);
    matches.clear();
    space.find_all(s, matches);
    EXPECT_EQ(!matches.empty(), utf8::is_white_space(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
}

TEST(Utf8Test, WordCharacters) {
  EXPECT_TRUE(utf8::is_word_char('a'));
  EXPECT_TRUE(utf8::is_word_char('_'));
  EXPECT_TRUE(utf8::is_word_char(0x0330));  // combining tilde below (a mark)
  EXPECT_TRUE(utf8::is_word_char(0x4E2D));  // 中
  EXPECT_FALSE(utf8::is_word_char('-'));
  EXPECT_FALSE(utf8::is_word_char(' '));
  EXPECT_FALSE(utf8::is_word_char(','));
}

}  // namespace
}  // namespace ditto
