// The tokenizer.json "normalizer": Unicode normalization forms (NFC, NFD, NFKC, NFKD via
// utf8proc), Prepend (a string before the text) and Replace (a literal string by another), a
// Sequence of them, or null. Any other normalizer type is rejected at load. Prepend and Replace are
// what SentencePiece-style tokenizers use to write spaces as U+2581 "▁" (Llama 2's
// Sequence[Prepend "▁", Replace " " -> "▁"]; Gemma's Replace alone); semantics follow Hugging Face
// tokenizers' normalizers/prepend.rs (nothing is prepended to an empty text) and replace.rs (every
// non-overlapping occurrence, left to right).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

class Normalizer {
 public:
  enum class Form { kNFC, kNFD, kNFKC, kNFKD };

  // Parses `j` (the "normalizer" value; null means none). `where` names it in errors, e.g.
  // "tokenizer.json: normalizer". Throws Error(kInvalidArgument) naming the unsupported type and
  // where it sits (e.g. "normalizer.normalizers[1].type 'Lowercase'"), or the field of a Prepend
  // / Replace that is missing or not a string (a Replace with a Regex pattern is refused).
  static Normalizer from_json(const nlohmann::json& j, const std::string& where);

  bool empty() const { return steps_.empty(); }

  // The normalized form of `text` (valid UTF-8). Returns `text` itself when normalization cannot
  // change it (a scan: for NFC every code point nfc_inert, for the other forms ASCII only);
  // otherwise writes the result to `storage` and returns a view of it. Thread-safe.
  std::string_view normalize(std::string_view text, std::string& storage) const;

 private:
  enum class Kind { kForm, kPrepend, kReplace };
  struct Step {
    Kind kind = Kind::kForm;
    Form form = Form::kNFC;
    std::string pattern;  // kReplace: the literal replaced
    std::string content;  // kPrepend: the prefix; kReplace: the replacement
  };
  static void parse_into(const nlohmann::json& j, const std::string& where, std::vector<Step>& steps);

  std::vector<Step> steps_;
};

// True when NFC leaves `cp` alone in any context: a starter (combining class 0) with no canonical
// decomposition (Hangul syllables excepted: they recompose) that is never the second half of a
// canonical composition. A string of such code points is already in NFC, so normalization can be
// skipped; normalizer_test checks the property against utf8proc for every code point.
bool nfc_inert(char32_t cp);

}  // namespace ditto
