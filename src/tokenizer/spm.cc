#include "tokenizer/spm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

// One symbol of the piece: bytes [begin, begin + len) of the text, in a doubly linked list.
// len == 0 marks a symbol merged into its left neighbour.
struct Symbol {
  uint32_t begin;
  uint32_t len;
  int32_t prev;
  int32_t next;
};

// A candidate merge of symbols left and right (adjacent when queued) into a token of `score`;
// `size` is the merged length in bytes, which tells a stale candidate from a live one.
struct Candidate {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;
};

// Heap order: the highest score on top, then the leftmost.
struct Below {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

std::string code_point_name(std::string_view character) {
  size_t pos = 0;
  char buf[16];
  std::snprintf(buf, sizeof(buf), "U+%04X", static_cast<unsigned>(utf8::next(character, pos)));
  return buf;
}

}  // namespace

std::unique_ptr<Spm> Spm::from_json(const nlohmann::json& model, const std::string& where) {
  if (!model.is_object()) throw_invalid_argument(where + ": expected an object");
  if (!model.contains("type") || !model["type"].is_string() || model["type"].get<std::string>() != "ditto_spm") {
    throw_invalid_argument(where + ".type: expected \"ditto_spm\"");
  }
  if (!model.contains("vocab") || !model["vocab"].is_array()) {
    throw_invalid_argument(where + ".vocab: expected an array of [token, score] pairs");
  }
  const auto& vocab = model["vocab"];
  if (static_cast<int64_t>(vocab.size()) > kMaxTokenId) {
    throw_invalid_argument(where + ".vocab: " + std::to_string(vocab.size()) + " tokens; at most 2^24");
  }
  std::unique_ptr<Spm> spm(new Spm());
  spm->where_ = where;
  spm->tokens_.reserve(vocab.size());
  spm->scores_.reserve(vocab.size());
  for (size_t id = 0; id < vocab.size(); ++id) {
    const auto& entry = vocab[id];
    const std::string at = where + ".vocab[" + std::to_string(id) + "]";
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number()) {
      throw_invalid_argument(at + ": expected [token, score]");
    }
    std::string token = entry[0].get<std::string>();
    if (token.empty()) throw_invalid_argument(at + ": the token is empty");
    spm->tokens_.push_back(std::move(token));
    const double score = entry[1].get<double>();
    if (!(std::fabs(score) <= std::numeric_limits<float>::max())) {
      throw_invalid_argument(at + ": the score " + entry[1].dump() + " is not a finite float32");
    }
    spm->scores_.push_back(static_cast<float>(score));
  }
  spm->vocab_.reserve(spm->tokens_.size());
  for (size_t id = 0; id < spm->tokens_.size(); ++id) {
    const auto [it, inserted] = spm->vocab_.emplace(spm->tokens_[id], static_cast<int32_t>(id));
    if (!inserted) {
      throw_invalid_argument(where + ".vocab[" + std::to_string(id) + "]: token " +
                             nlohmann::json(spm->tokens_[id]).dump() + " repeats " + where + ".vocab[" +
                             std::to_string(it->second) + "]");
    }
  }
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    std::optional<int32_t> id = spm->token_to_id(name);
    if (!id && b < 0x80) id = spm->token_to_id(std::string(1, static_cast<char>(b)));
    spm->byte_ids_[b] = id.value_or(-1);
  }
  return spm;
}

std::optional<int32_t> Spm::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Spm::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

void Spm::byte_fallback(std::string_view character, std::vector<int32_t>& ids) const {
  for (const char c : character) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned>(static_cast<uint8_t>(c)));
      throw_invalid_argument(where_ + ": " + code_point_name(character) +
                             " is not in the vocabulary and its byte fallback needs the token " + name +
                             ", which the vocabulary lacks (tokenizer.ggml.tokens of a GGUF file)");
    }
    ids.push_back(id);
  }
}

void Spm::tokenize(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  Scratch& s = scratch();
  std::vector<Symbol>& symbols = s.symbols;
  std::vector<Candidate>& heap = s.heap;
  symbols.clear();
  heap.clear();
  for (size_t i = 0; i < text.size();) {
    const size_t len = std::min<size_t>(utf8::sequence_length(static_cast<unsigned char>(text[i])), text.size() - i);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(
        {static_cast<uint32_t>(i), static_cast<uint32_t>(len), index - 1, i + len < text.size() ? index + 1 : -1});
    i += len;
  }
  // Adjacent symbols are adjacent bytes of `text`, so a pair's text is a slice of it.
  auto push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = symbols[left].len + symbols[right].len;
    const auto it = vocab_.find(text.substr(symbols[left].begin, size));
    if (it == vocab_.end()) return;
    heap.push_back({scores_[static_cast<size_t>(it->second)], left, right, size});
    std::push_heap(heap.begin(), heap.end(), Below{});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) push(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Below{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != c.size) continue;  // stale
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    push(left.prev, c.left);
    push(c.left, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].len);
    const auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      ids.push_back(it->second);
    } else {
      byte_fallback(piece, ids);  // an unmerged symbol: one character
    }
  }
}

}  // namespace ditto
