#include "core/base64.h"

#include <algorithm>
#include <cstdint>

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

}  // namespace ditto
