// The tokenizer.json "normalizer": Unicode normalization forms (NFC, NFD, NFKC, NFKD via
// utf8proc), a Sequence of them, or null. Any other normalizer type is rejected at load.
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
  // where it sits (e.g. "normalizer.normalizers[1].type 'Lowercase'").
  static Normalizer from_json(const nlohmann::json& j, const std::string& where);

  bool empty() const { return forms_.empty(); }

  // The normalized form of `text` (valid UTF-8). Returns `text` itself when normalization cannot
  // change it (a scan: for NFC every code point nfc_inert, for the other forms ASCII only);
  // otherwise writes the result to `storage` and returns a view of it. Thread-safe.
  std::string_view normalize(std::string_view text, std::string& storage) const;

 private:
  std::vector<Form> forms_;
};

// True when NFC leaves `cp` alone in any context: a starter (combining class 0) with no canonical
// decomposition (Hangul syllables excepted: they recompose) that is never the second half of a
// canonical composition. A string of such code points is already in NFC, so normalization can be
// skipped; normalizer_test checks the property against utf8proc for every code point.
bool nfc_inert(char32_t cp);

}  // namespace ditto
