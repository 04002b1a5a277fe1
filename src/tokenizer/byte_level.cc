#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace ditto::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_char{};
  std::array<std::string, 256> byte_utf8;
  std::array<int16_t, 512> char_byte{};  // every alphabet code point is below U+0200

  Tables() {
    char_byte.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_char[b] = printable ? static_cast<char32_t>(b) : next_extra++;
      char_byte[byte_char[b]] = static_cast<int16_t>(b);
      utf8::append(byte_utf8[b], byte_char[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t b) { return tables().byte_char[b]; }

std::string_view byte_to_utf8(uint8_t b) { return tables().byte_utf8[b]; }

int char_to_byte(char32_t cp) { return cp < 512 ? tables().char_byte[cp] : -1; }

void encode(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  for (const char c : bytes) out.append(t.byte_utf8[static_cast<uint8_t>(c)]);
}

std::string decode_token(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    const int b = char_to_byte(utf8::next(token, i));
    if (b < 0) return std::string(token);
    out.push_back(static_cast<char>(b));
  }
  return out;
}

}  // namespace ditto::byte_level
