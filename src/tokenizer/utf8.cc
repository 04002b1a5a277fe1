#include "tokenizer/utf8.h"

#include <utf8proc.h>

namespace ditto::utf8 {
namespace {

bool continues(const unsigned char* seq, int len, unsigned char b) {
  unsigned char lo, hi;
  expected_length(seq[0], &lo, &hi);
  if (len == 1) return b >= lo && b <= hi;
  return b >= 0x80 && b <= 0xBF;
}

}  // namespace

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::u32string to_utf32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next(s, i));
  return out;
}

std::string from_utf32(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t cp : s) append(out, cp);
  return out;
}

size_t find_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 1;
    // A well-formed U+FFFD is 3 bytes long; decode() reports an ill-formed sequence as length 1.
    if (decode(s, i, &len) == 0xFFFD && len == 1) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string decode_lossy(std::string_view bytes) {
  if (find_invalid(bytes) == std::string_view::npos) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  StreamDecoder decoder;
  decoder.feed(bytes, out);
  decoder.finish(out);
  return out;
}

void StreamDecoder::feed(std::string_view bytes, std::string& out) {
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (pending_len_ > 0) {
      if (continues(pending_, pending_len_, b)) {
        pending_[pending_len_++] = b;
        if (pending_len_ == expected_len_) {
          out.append(reinterpret_cast<const char*>(pending_), pending_len_);
          pending_len_ = 0;
        }
        continue;
      }
      // The held bytes are a maximal subpart of an ill-formed sequence; `b` starts afresh.
      out.append(kReplacementCharacter);
      pending_len_ = 0;
    }
    unsigned char lo, hi;
    const int len = expected_length(b, &lo, &hi);
    if (len == 1) {
      out.push_back(c);
    } else if (len == 0) {
      out.append(kReplacementCharacter);
    } else {
      pending_[0] = b;
      pending_len_ = 1;
      expected_len_ = len;
    }
  }
}

void StreamDecoder::finish(std::string& out) {
  if (pending_len_ > 0) out.append(kReplacementCharacter);
  pending_len_ = 0;
}

bool is_white_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
  }
}

}  // namespace ditto::utf8
