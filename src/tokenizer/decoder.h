// Turning tokens back into text: the tokenizer.json "decoder" (ByteLevel, a Sequence of ByteLevel,
// or null) and transformers' clean_up_tokenization, whole or streamed.
//
// Hugging Face decodes ids by joining their token strings and passing them to the decoder; the
// ByteLevel decoder (decoders/byte_level.rs) maps every character of a token back to its byte (a
// token with a character outside the byte alphabet, e.g. an added token "你好", contributes its
// own UTF-8 bytes instead) and decodes all the bytes at once with String::from_utf8_lossy, which
// is Python's bytes.decode("utf-8", errors="replace"). Without a decoder the tokens are joined
// with spaces.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ditto {

class Decoder {
 public:
  // Parses `j` (the "decoder" value; null means none). `where` names it in errors. Throws
  // Error(kInvalidArgument) naming an unsupported decoder type (e.g. Metaspace, WordPiece).
  static Decoder from_json(const nlohmann::json& j, const std::string& where);

  // ByteLevel: token strings stand for bytes, and the joined bytes are decoded lossily.
  bool byte_level() const { return byte_level_; }
  // The bytes `token` contributes to the decoded text.
  std::string token_bytes(std::string_view token) const;
  // Without a decoder, consecutive tokens are separated by one space.
  bool joins_with_space() const { return !byte_level_; }

 private:
  bool byte_level_ = false;
};

// transformers' PreTrainedTokenizerBase.clean_up_tokenization: removes the space before . ? ! ,
// and English contractions (" ' " -> "'", " n't" -> "n't", " 'm", " 's", " 've", " 're"), each
// rule applied to the whole text in that order, as Python's str.replace does.
std::string clean_up_tokenization(std::string_view text);

// clean_up_tokenization on a text that arrives in pieces: the concatenation of every feed() and
// finish() output equals clean_up_tokenization() of the concatenated input. Text is held back
// only until a boundary no rule can cross has been seen (two adjacent characters, neither a
// space, the first not one of n ' v r: see decoder.cc), so output lags by about one word.
// Not thread-safe (one stream per object).
class CleanUpStream {
 public:
  void feed(std::string_view text, std::string& out);
  void finish(std::string& out);

 private:
  std::string pending_;
};

}  // namespace ditto
