// Base64 (RFC 4648 §4, the standard alphabet, with '=' padding): how the OpenAI-compatible
// server sends binary payloads in JSON (embeddings' encoding_format "base64", routed experts).
#pragma once

#include <span>
#include <string>

namespace ditto {

// `bytes` as base64 text: 4 characters per 3 bytes, the last group padded with '='.
std::string base64_encode(std::span<const unsigned char> bytes);

}  // namespace ditto
