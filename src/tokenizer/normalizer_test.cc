// The normalizer: nfc_inert checked against utf8proc for every code point, and the segmented NFC
// against utf8proc's whole-string NFC.
#include "tokenizer/normalizer.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

std::string utf8proc_nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  EXPECT_GE(n, 0);
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::vector<char32_t> nfd(char32_t cp) {
  utf8proc_int32_t buf[32];
  int last_boundclass = 0;
  const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 32,
                                         static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE), &last_boundclass);
  return std::vector<char32_t>(buf, buf + std::max<utf8proc_ssize_t>(n, 0));
}

bool scalar(char32_t cp) { return cp < 0xD800 || (cp >= 0xE000 && cp < 0x110000); }

TEST(NormalizerTest, InertCodePointsAreStableAndNeverComposeBackwards) {
  // Every character that is the last of a canonical decomposition can be the second half of a
  // composition (or a reordered mark): none of them may be inert.
  std::set<char32_t> seconds;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (!scalar(cp)) continue;
    const auto d = nfd(cp);
    if (d.size() >= 2) seconds.insert(d.back());
  }
  ASSERT_GT(seconds.size(), 50u);
  for (const char32_t s : seconds) EXPECT_FALSE(nfc_inert(s)) << std::hex << static_cast<uint32_t>(s);
  // Inert characters are NFC-stable alone and after a starter that composes with marks.
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (!scalar(cp) || !nfc_inert(cp)) continue;
    std::string s;
    utf8::append(s, cp);
    ASSERT_EQ(utf8proc_nfc(s), s) << std::hex << static_cast<uint32_t>(cp);
    const std::string after_e = "e" + s;
    ASSERT_EQ(utf8proc_nfc(after_e), after_e) << std::hex << static_cast<uint32_t>(cp);
  }
  // The common scripts are on the fast path.
  for (const char32_t cp : {U'a', U'é', U'中', U'日', U'한', U'ж', U'ع', U'😀'}) EXPECT_TRUE(nfc_inert(cp));
  for (const char32_t cp : {0x0301u, 0x0338u, 0x1161u, 0x11A8u, 0x212Bu, 0x0958u}) EXPECT_FALSE(nfc_inert(cp));
}

TEST(NormalizerTest, SegmentedNfcEqualsWholeStringNfc) {
  const Normalizer nfc = Normalizer::from_json({{"type", "NFC"}}, "test");
  // Inert characters mixed with marks, jamo, singletons and exclusions in random order.
  const std::vector<char32_t> alphabet = {U'a',   U'e',   U'A',   U' ',   U'中',  0xAC00, 0x1100, 0x1161, 0x11A8,
                                          0x0301, 0x0327, 0x0338, 0x0323, 0x212B, 0x0958, 0x0B47, 0x0B3E, 0x0915,
                                          0x093C, U'>',   U'=',   0x3099, 0x304B, 0x1E0B, U'Å'};
  std::mt19937 rng(3);
  std::string storage;
  for (int k = 0; k < 20000; ++k) {
    std::string s;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) utf8::append(s, alphabet[rng() % alphabet.size()]);
    const std::string_view got = nfc.normalize(s, storage);
    ASSERT_EQ(std::string(got), utf8proc_nfc(s)) << s;
  }
  // Text that needs no change is returned as is, without a copy.
  const std::string plain = "Hello, 世界! 안녕하세요";
  EXPECT_EQ(nfc.normalize(plain, storage).data(), plain.data());
  EXPECT_EQ(std::string(nfc.normalize("cafe\xcc\x81", storage)), "caf\xc3\xa9");
}

TEST(NormalizerTest, SequenceAndNull) {
  std::string storage;
  const Normalizer none = Normalizer::from_json(nullptr, "test");
  EXPECT_TRUE(none.empty());
  const Normalizer seq =
      Normalizer::from_json({{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "NFC"}}}}}, "test");
  EXPECT_EQ(std::string(seq.normalize("\xe2\x84\xab", storage)), "\xc3\x85");  // Angstrom sign -> Å
}

TEST(NormalizerTest, UnsupportedTypeNamesItsPlace) {
  try {
    Normalizer::from_json({{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}},
                          "tokenizer.json: normalizer");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("normalizer.normalizers[1].type 'Lowercase'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ditto
