// The tokenizer.json "added_tokens": tokens matched in the raw text before normalization and
// pre-tokenization (special tokens such as <|im_start|>, and plain added tokens such as <think>).
// Semantics follow Hugging Face tokenizers' tokenizer/added_vocabulary.rs: leftmost-longest
// matching (its Aho-Corasick MatchKind::LeftmostLongest), then per token `single_word` (discard a
// match touching a word character), `lstrip` / `rstrip` (absorb the whitespace run on that side),
// and `normalized` (match against the normalized text instead of the raw text).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ditto {

class TokenizerModel;
class Normalizer;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A piece of a split: bytes [begin, end) of the text, and the added token they are (id >= 0) or
// -1 for text still to be tokenized. Pieces are in order and cover the text; rstrip can make a
// token's piece overlap the next one, exactly as in Hugging Face.
struct AddedSplit {
  uint32_t begin;
  uint32_t end;
  int32_t id;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;

  // Parses the "added_tokens" array (null or absent: none). A token whose content is in the
  // model's vocabulary takes the model's id (as Hugging Face's add_tokens does); otherwise the
  // file's "id". Normalized tokens are matched by their normalized content. `where` names the
  // array in errors. Throws Error(kInvalidArgument) naming the entry for a missing or mistyped
  // field, or two different tokens claiming one id.
  static AddedVocabulary from_json(const nlohmann::json& added_tokens, const std::string& where,
                                   const TokenizerModel& model, const Normalizer& normalizer);

  // Splits `text` on the tokens with normalized == false (raw_pass) or true (!raw_pass),
  // appending to `out` (offsets relative to `text`); text without any match is one piece.
  // Thread-safe.
  void split(std::string_view text, bool raw_pass, std::vector<AddedSplit>& out) const;

  bool has_normalized_tokens() const { return !tries_[1].nodes.empty(); }
  bool empty() const { return by_id_.empty(); }

  // The token with this id, or nullptr.
  const AddedToken* find(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view content) const;
  // Largest id plus one (0 when there are none).
  int32_t id_limit() const { return id_limit_; }

 private:
  // A byte trie of the patterns of one pass; node 0 is the root.
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node
      int32_t token = -1;                                 // id of the token ending here
    };
    std::vector<Node> nodes;
    bool first_byte[256] = {};
    void insert(std::string_view pattern, int32_t id);
    // Length of the longest pattern starting at text[pos] (0: none) and its token id.
    size_t longest_at(std::string_view text, size_t pos, int32_t* id) const;
  };

  std::vector<AddedToken> tokens_;             // in file order
  std::unordered_map<int32_t, size_t> by_id_;  // id -> index in tokens_
  std::unordered_map<std::string, int32_t> by_content_;
  Trie tries_[2];  // [0]: raw text, [1]: normalized text
  int32_t id_limit_ = 0;
};

}  // namespace ditto
