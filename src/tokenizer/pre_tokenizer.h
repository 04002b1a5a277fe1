// The tokenizer.json "pre_tokenizer": Split (a Regex or String pattern, a behavior, invert),
// ByteLevel (optional prefix space and GPT-2 regex; the byte-to-character mapping itself is left
// to the BPE model, see Bpe::tokenize), Sequence of those, or null. Semantics follow Hugging Face
// tokenizers' pre_tokenizers/split.rs, byte_level.rs and NormalizedString::split.
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
  // holds valid UTF-8 and may grow (ByteLevel's prefix space appends copies of pieces).
  // Thread-safe.
  void pre_tokenize(std::string& buffer, std::vector<MatchSpan>& pieces) const;

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: ByteLevel without regex (prefix space only)
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel: prepend ' ' to pieces not starting with one
  };
  void parse_into(const nlohmann::json& j, const std::string& where);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace ditto
