#include "core/base64.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/error.h"

namespace ditto {

std::string base64_encode(std::span<const unsigned char> bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = uint32_t{bytes[i]} << 16;
    if (n > 1) chunk |= uint32_t{bytes[i + 1]} << 8;
    if (n > 2) chunk |= bytes[i + 2];
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

std::string base64_decode(const std::string& text, const std::string& field) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> v{};
    v.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return v;
  }();
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '=' && text.size() - end < 2) --end;
  std::string out;
  out.reserve(end / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < end; ++i) {
    const int8_t v = kValue[static_cast<unsigned char>(text[i])];
    if (v < 0)
      throw_invalid_field(field, "field '" + field + "' is not base64: character " + std::to_string(i) + " is '" +
                                     std::string(1, text[i]) + "'");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

}  // namespace ditto
