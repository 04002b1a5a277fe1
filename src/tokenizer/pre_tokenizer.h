// The tokenizer.json "pre_tokenizer": Split (a Regex or String pattern, a behavior, invert),
// ByteLevel (optional prefix space and GPT-2 regex; the byte-to-character mapping itself is left
// to the BPE model, see Bpe::tokenize), Metaspace (spaces written as a replacement character,
// usually U+2581 "▁", with prepend_scheme always / first / never and optional split), Sequence of
// those, or null. Semantics follow Hugging Face tokenizers' pre_tokenizers/split.rs, byte_level.rs,
// metaspace.rs and NormalizedString::split. Metaspace prepends the replacement to a piece that does
// not already start with it ("first": only to the piece that starts the whole input text, i.e. not
// to text after an added token), and with split true splits before each replacement
// (MergedWithNext).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace ditto {

class PreTokenizer {
 public:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

  // Parses `j` (the "pre_tokenizer" value; null means none). `where` names it in errors, e.g.
  // "tokenizer.json: pre_tokenizer". Throws Error(kInvalidArgument) naming the unsupported type,
  // a bad behavior, or the regex and PCRE2's message and offset for a pattern that does not
  // compile. A ByteLevel must come last (a step after it would see byte-level characters,
  // which ditto does not materialize).
  static PreTokenizer from_json(const nlohmann::json& j, const std::string& where);

  // True when a ByteLevel step is present: the pieces are raw bytes that the model must map to
  // the byte-level alphabet.
  bool byte_level() const { return byte_level_; }

  // Splits `buffer` into `pieces` (byte ranges of `buffer`, in order, none empty). `buffer`
  // holds valid UTF-8 and may grow (ByteLevel's prefix space and Metaspace append rewritten copies
  // of pieces). `at_text_start`: the buffer's first byte is the first byte of the text given to
  // encode (Metaspace's prepend_scheme "first"). Thread-safe.
  void pre_tokenize(std::string& buffer, std::vector<MatchSpan>& pieces, bool at_text_start = true) const;

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: ByteLevel without regex (prefix space only)
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel: prepend ' ' to pieces not starting with one
    // Metaspace: ' ' becomes `replacement` and, per prepend_scheme, the replacement is prepended;
    // `regex` (a literal of the replacement, or null without split) then splits MergedWithNext.
    std::string replacement;  // empty: not a Metaspace step
    enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  };
  void parse_into(const nlohmann::json& j, const std::string& where);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace ditto
