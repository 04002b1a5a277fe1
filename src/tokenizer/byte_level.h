// GPT-2's byte-level alphabet (bytes_to_unicode in openai/gpt-2 encoder.py, BYTES_CHAR in Hugging
// Face tokenizers' pre_tokenizers/byte_level.rs): every byte maps to one printable code point, so
// that a byte-level BPE vocabulary is made of ordinary strings. Printable bytes '!'..'~',
// 0xA1..0xAC and 0xAE..0xFF map to themselves; the other 68 bytes, in increasing order, map to
// U+0100, U+0101, ... (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ditto::byte_level {

// The code point that stands for byte `b`.
char32_t byte_to_char(uint8_t b);

// The UTF-8 encoding of byte_to_char(b) (1 or 2 bytes); a view of static storage.
std::string_view byte_to_utf8(uint8_t b);

// The byte a code point stands for, or -1 when `cp` is not in the alphabet.
int char_to_byte(char32_t cp);

// Appends the byte-level form of `bytes` (each byte replaced by its character) to `out`.
void encode(std::string_view bytes, std::string& out);

// The bytes a token string stands for, as the ByteLevel decoder computes them: each character
// mapped back to its byte when every character of `token` is in the alphabet, else the token's
// own UTF-8 bytes unchanged (Hugging Face decoders/byte_level.rs falls back the same way).
std::string decode_token(std::string_view token);

}  // namespace ditto::byte_level
