#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

bool flag(const nlohmann::json& entry, const char* key, bool fallback, const std::string& where) {
  if (!entry.contains(key) || entry[key].is_null()) return fallback;
  if (!entry[key].is_boolean()) throw_invalid_argument(where + "." + key + ": expected true or false");
  return entry[key].get<bool>();
}

// Rust regex `\w$` on text[..end]: the character before `end` is a word character.
bool ends_with_word(std::string_view text, size_t end) {
  if (end == 0) return false;
  size_t i = end;
  return utf8::is_word_char(utf8::previous(text, i));
}

// Rust regex `^\w` on text[begin..].
bool starts_with_word(std::string_view text, size_t begin) {
  if (begin >= text.size()) return false;
  return utf8::is_word_char(utf8::next(text, begin));
}

// Start of the whitespace run that ends at `end` (Rust regex `\s*$` on text[..end]).
size_t whitespace_run_before(std::string_view text, size_t end) {
  size_t i = end;
  while (i > 0) {
    size_t j = i;
    if (!utf8::is_white_space(utf8::previous(text, j))) break;
    i = j;
  }
  return i;
}

// End of the whitespace run that starts at `begin` (Rust regex `^\s*` on text[begin..]).
size_t whitespace_run_after(std::string_view text, size_t begin) {
  size_t i = begin;
  while (i < text.size()) {
    size_t j = i;
    if (!utf8::is_white_space(utf8::next(text, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view pattern, int32_t id) {
  if (nodes.empty()) nodes.emplace_back();
  int32_t node = 0;
  for (const char c : pattern) {
    const auto b = static_cast<uint8_t>(c);
    auto& children = nodes[node].children;
    const auto it = std::find_if(children.begin(), children.end(), [b](const auto& e) { return e.first == b; });
    if (it != children.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes.size());
      children.emplace_back(b, child);
      nodes.emplace_back();  // invalidates `children`, which is not used again
      node = child;
    }
  }
  // Among identical patterns the first inserted wins (Aho-Corasick's leftmost-longest does too).
  if (nodes[node].token < 0) nodes[node].token = id;
  first_byte[static_cast<uint8_t>(pattern[0])] = true;
}

size_t AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos, int32_t* id) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    const auto& children = nodes[node].children;
    const auto it = std::find_if(children.begin(), children.end(), [b](const auto& e) { return e.first == b; });
    if (it == children.end()) break;
    node = it->second;
    if (nodes[node].token >= 0) {
      best = i + 1 - pos;
      *id = nodes[node].token;
    }
  }
  return best;
}

AddedVocabulary AddedVocabulary::from_json(const nlohmann::json& added_tokens, const std::string& where,
                                           const TokenizerModel& model, const Normalizer& normalizer) {
  AddedVocabulary v;
  if (added_tokens.is_null()) return v;
  if (!added_tokens.is_array()) throw_invalid_argument(where + ": expected an array");
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const auto& entry = added_tokens[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!entry.is_object()) throw_invalid_argument(at + ": expected an object");
    if (!entry.contains("content") || !entry["content"].is_string()) {
      throw_invalid_argument(at + ".content: expected a string");
    }
    if (!entry.contains("id") || !entry["id"].is_number_integer() || entry["id"].get<int64_t>() < 0 ||
        entry["id"].get<int64_t>() >= kMaxTokenId) {
      throw_invalid_argument(at + ".id: expected an id in [0, 2^24)");
    }
    AddedToken t;
    t.content = entry["content"].get<std::string>();
    t.special = flag(entry, "special", false, at);
    t.single_word = flag(entry, "single_word", false, at);
    t.lstrip = flag(entry, "lstrip", false, at);
    t.rstrip = flag(entry, "rstrip", false, at);
    // Hugging Face's default: special tokens are not normalized, others are.
    t.normalized = flag(entry, "normalized", !t.special, at);
    // Hugging Face ignores empty tokens and repeats of a content already added.
    if (t.content.empty() || v.by_content_.count(t.content) != 0) continue;
    t.id = model.token_to_id(t.content).value_or(static_cast<int32_t>(entry["id"].get<int64_t>()));
    if (const std::string* other = model.id_to_token(t.id); other != nullptr && *other != t.content) {
      throw_invalid_argument(at + ": id " + std::to_string(t.id) + " of " + nlohmann::json(t.content).dump() +
                             " is the vocabulary's id of " + nlohmann::json(*other).dump());
    }
    if (v.by_id_.count(t.id) != 0) {
      throw_invalid_argument(at + ": id " + std::to_string(t.id) + " of " + nlohmann::json(t.content).dump() +
                             " is already taken by " + nlohmann::json(v.tokens_[v.by_id_[t.id]].content).dump());
    }
    v.by_id_.emplace(t.id, v.tokens_.size());
    v.by_content_.emplace(t.content, t.id);
    v.id_limit_ = std::max(v.id_limit_, t.id + 1);
    v.tokens_.push_back(std::move(t));
  }
  // Hugging Face matches the special tokens first, then the others (relevant only for equal
  // patterns, where the first one wins).
  std::string storage;
  for (const bool special_pass : {true, false}) {
    for (const AddedToken& t : v.tokens_) {
      if (t.special != special_pass) continue;
      if (t.normalized) {
        const std::string_view pattern = normalizer.normalize(t.content, storage);
        if (!pattern.empty()) v.tries_[1].insert(pattern, t.id);
      } else {
        v.tries_[0].insert(t.content, t.id);
      }
    }
  }
  return v;
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

void AddedVocabulary::split(std::string_view text, bool raw_pass, std::vector<AddedSplit>& out) const {
  const Trie& trie = tries_[raw_pass ? 0 : 1];
  const auto size = static_cast<uint32_t>(text.size());
  if (trie.nodes.empty()) {
    out.push_back({0, size, -1});
    return;
  }
  // Hugging Face's AddedVocabulary::find_matches over the leftmost-longest matches.
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    int32_t id = -1;
    const size_t length = trie.longest_at(text, pos, &id);
    if (length == 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + length;
    pos = stop;  // the next match is searched after this one, even if it is discarded below
    const AddedToken& token = tokens_[by_id_.at(id)];
    if (token.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text, start);
      const bool stop_space = stop == text.size() || !starts_with_word(text, stop);
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) start = std::max(whitespace_run_before(text, start), start_offset);
    if (token.rstrip) stop = whitespace_run_after(text, stop);
    if (start_offset < start) out.push_back({static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start), -1});
    out.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(stop), id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({static_cast<uint32_t>(start_offset), size, -1});
}

}  // namespace ditto
