// Base64 (RFC 4648 §4, the standard alphabet, with '=' padding): how the OpenAI-compatible
// server sends binary payloads in JSON (embeddings' encoding_format "base64", routed experts) and
// takes them (a weight update's tensors).
#pragma once

#include <span>
#include <string>

namespace ditto {

// `bytes` as base64 text: 4 characters per 3 bytes, the last group padded with '='.
std::string base64_encode(std::span<const unsigned char> bytes);

// The bytes of base64 text (padding optional; no whitespace): how a trainer sends tensors to
// /update_weights. Throws Error(kInvalidArgument) naming `field` at the first character that is
// not base64.
std::string base64_decode(const std::string& text, const std::string& field);

}  // namespace ditto
