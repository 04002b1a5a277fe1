// Turning tokens back into text: the tokenizer.json "decoder" and transformers'
// clean_up_tokenization, whole or streamed.
//
// Hugging Face decodes ids by mapping them to token strings and passing the list through the
// decoder (tokenizers' decoders/*.rs). Supported:
//   - ByteLevel (alone, or a Sequence of it): every character of a token stands for a byte
//     (decoders/byte_level.rs); a token with a character outside the byte alphabet, e.g. an added
//     token "你好", contributes its own UTF-8 bytes.
//   - The SentencePiece family, as a Sequence of per-token steps, then Fuse, then Strip:
//       Replace {"String": p} -> content   every p in the token replaced (Llama 2, Gemma: "▁" -> " ")
//       ByteFallback                       a token "<0xXX>" becomes the byte 0xXX
//       Strip (before Fuse)                up to `start` leading / `stop` trailing `content` per token
//       Fuse                               the tokens joined into one string
//       Strip (after Fuse, stop 0)         up to `start` leading `content` of the whole text (the
//                                          space that a "▁" prefix added: Llama 2's Strip(" ", 1, 0))
//     and Metaspace (replacement -> " " per token, and with a prepend scheme other than "never"
//     one leading space of the text removed).
//   - null: token strings joined with single spaces.
// With a decoder, the bytes of all tokens are joined and decoded at once as Python's
// bytes.decode("utf-8", errors="replace") does. Known difference from Hugging Face's ByteFallback:
// a run of byte tokens that is not valid UTF-8 gives one U+FFFD per maximal ill-formed subpart
// here (Python's rule, as for ByteLevel), one per byte token there; the Metaspace decoder's strip
// looks at the first token in Hugging Face and at the whole text here (these differ only when the
// first token decodes to nothing).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

class Decoder {
 public:
  // Parses `j` (the "decoder" value; null means none). `where` names it in errors. Throws
  // Error(kInvalidArgument) naming an unsupported decoder type (e.g. WordPiece), a step after
  // Fuse other than a Strip with stop 0, a ByteLevel combined with other steps, or a malformed
  // field.
  static Decoder from_json(const nlohmann::json& j, const std::string& where);

  // The bytes `token` contributes to the decoded text (before the whole-text strip).
  std::string token_bytes(std::string_view token) const;
  // Without a decoder, consecutive tokens are separated by one space and nothing else happens;
  // with one, the joined bytes are decoded lossily (see above).
  bool joins_with_space() const { return !present_; }
  // The whole-text Strip: how many leading `strip_content()` are removed (0: none).
  size_t strip_start() const { return strip_start_; }
  const std::string& strip_content() const { return strip_content_; }
  // Removes up to strip_start() leading strip_content() from `text`; returns how many it removed.
  size_t strip_leading(std::string& text, size_t at_most) const;

 private:
  struct TokenStep {
    enum class Kind { kReplace, kByteFallback, kStrip } kind;
    std::string pattern;         // kReplace
    std::string content;         // kReplace: the replacement; kStrip: the character stripped
    size_t start = 0, stop = 0;  // kStrip
  };
  void parse_into(const nlohmann::json& j, const std::string& where);

  bool present_ = false;
  bool byte_level_ = false;
  bool fused_ = false;
  std::vector<TokenStep> token_steps_;
  size_t strip_start_ = 0;
  std::string strip_content_;
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
