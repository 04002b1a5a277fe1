#include "tokenizer/bpe.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <functional>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

constexpr uint64_t kEmptyKey = ~uint64_t{0};  // never a key: ids are below 2^31

// A symbol for a character outside the vocabulary under "ditto_unknown_separates": no pair holding
// it has a merge (key(-1, -1) is kEmptyKey, which find() never returns), and it is dropped after the
// merges.
constexpr int32_t kUnknownSymbol = -1;

// Words longer than this (bytes) are not cached: they are rare and would crowd out common ones.
constexpr size_t kMaxCachedBytes = 256;

std::string describe(const nlohmann::json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

std::optional<std::string> optional_string(const nlohmann::json& model, const char* key, const std::string& where) {
  if (!model.contains(key) || model[key].is_null()) return std::nullopt;
  if (!model[key].is_string()) throw_invalid_argument(where + "." + key + ": expected a string or null");
  return model[key].get<std::string>();
}

bool optional_bool(const nlohmann::json& model, const char* key, const std::string& where) {
  if (!model.contains(key) || model[key].is_null()) return false;
  if (!model[key].is_boolean()) throw_invalid_argument(where + "." + key + ": expected true or false");
  return model[key].get<bool>();
}

// The model's type and the fields ditto needs or refuses; Hugging Face accepts a model without
// "type" when its fields say BPE (vocab + merges).
void check_bpe_model(const nlohmann::json& model, const std::string& where) {
  if (!model.is_object()) throw_invalid_argument(where + ": expected an object");
  if (model.contains("type")) {
    if (!model["type"].is_string()) throw_invalid_argument(where + ".type: expected a string");
    const std::string type = model["type"].get<std::string>();
    if (type != "BPE") {
      throw_invalid_argument(where + ".type '" + type + "' is not supported (ditto supports the BPE model only)");
    }
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    throw_invalid_argument(where + ".vocab: expected an object mapping token strings to ids");
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    throw_invalid_argument(where + ".merges: expected an array");
  }
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    if (!model["dropout"].is_number()) throw_invalid_argument(where + ".dropout: expected a number or null");
    if (model["dropout"].get<double>() != 0.0) {
      throw_invalid_argument(where + ".dropout " + model["dropout"].dump() +
                             " is not supported (BPE dropout is random; ditto tokenizes deterministically)");
    }
  }
}

// model.vocab -> tokens by id (`tokens`, with `has_token` marking the ids it names).
void read_vocab(const nlohmann::json& vocab, const std::string& where, std::vector<std::string>& tokens,
                std::vector<uint8_t>& has_token) {
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    // Ids index dense tables; real vocabularies stay far below 2^24, so a larger id is a broken file
    // (and would otherwise cost gigabytes).
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() >= kMaxTokenId) {
      throw_invalid_argument(where + ".vocab[" + nlohmann::json(it.key()).dump() +
                             "]: expected an id in [0, 2^24), got " + describe(it.value()));
    }
    max_id = std::max(max_id, it.value().get<int64_t>());
  }
  tokens.resize(static_cast<size_t>(max_id + 1));
  has_token.assign(static_cast<size_t>(max_id + 1), 0);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto id = static_cast<size_t>(it.value().get<int64_t>());
    if (has_token[id]) {
      throw_invalid_argument(where + ".vocab: tokens " + nlohmann::json(tokens[id]).dump() + " and " +
                             nlohmann::json(it.key()).dump() + " share the id " + std::to_string(id));
    }
    tokens[id] = it.key();
    has_token[id] = 1;
  }
}

// The two tokens of one entry of model.merges, written "a b" or ["a", "b"]; `at` names the entry.
std::pair<std::string, std::string> merge_pair(const nlohmann::json& m, const std::string& at) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      throw_invalid_argument(at + " " + describe(m) + ": expected two tokens separated by one space");
    }
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  throw_invalid_argument(at + " " + describe(m) + ": expected \"a b\" or [\"a\", \"b\"]");
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// PairMap

void Bpe::PairMap::reserve(size_t n) {
  size_t capacity = 16;
  while (capacity < n * 2) capacity <<= 1;
  slots_.assign(capacity, Slot{kEmptyKey, Merge{}});
  mask_ = capacity - 1;
  size_ = 0;
}

size_t Bpe::PairMap::slot(uint64_t k) const {
  // Fibonacci hashing: the high bits of the product mix both ids.
  size_t i = static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 20) & mask_;
  while (slots_[i].key != kEmptyKey && slots_[i].key != k) i = (i + 1) & mask_;
  return i;
}

void Bpe::PairMap::insert_or_assign(int32_t left, int32_t right, Merge merge) {
  if ((size_ + 1) * 2 > slots_.size()) {
    // Grow: re-insert everything into a table twice the size.
    std::vector<Slot> old = std::move(slots_);
    reserve(std::max<size_t>(16, old.size()));
    for (const Slot& s : old) {
      if (s.key == kEmptyKey) continue;
      slots_[slot(s.key)] = s;
      ++size_;
    }
  }
  const uint64_t k = key(left, right);
  Slot& s = slots_[slot(k)];
  if (s.key == kEmptyKey) ++size_;
  s = Slot{k, merge};
}

const Bpe::Merge* Bpe::PairMap::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const Slot& s = slots_[slot(key(left, right))];
  return s.key == kEmptyKey ? nullptr : &s.merge;
}

// ------------------------------------------------------------------------------------------------
// WordCache

bool Bpe::WordCache::find(std::string_view word, size_t hash, std::vector<int32_t>& ids) const {
  Shard& shard = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.map.find(word);
  if (it == shard.map.end()) return false;
  ids.insert(ids.end(), it->second.begin(), it->second.end());
  return true;
}

void Bpe::WordCache::insert(std::string_view word, size_t hash, const int32_t* ids, size_t n) const {
  Shard& shard = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= kCapacityPerShard) return;
  shard.map.try_emplace(std::string(word), ids, ids + n);
}

// ------------------------------------------------------------------------------------------------
// Loading

std::unique_ptr<Bpe> Bpe::from_json(const nlohmann::json& model, const std::string& where, bool byte_level_input) {
  check_bpe_model(model, where);

  std::unique_ptr<Bpe> bpe(new Bpe());
  bpe->byte_level_input_ = byte_level_input;
  bpe->fuse_unk_ = optional_bool(model, "fuse_unk", where);
  bpe->byte_fallback_ = optional_bool(model, "byte_fallback", where);
  bpe->ignore_merges_ = optional_bool(model, "ignore_merges", where);
  bpe->unknown_separates_ = optional_bool(model, "ditto_unknown_separates", where);
  bpe->continuing_subword_prefix_ = optional_string(model, "continuing_subword_prefix", where).value_or("");
  bpe->end_of_word_suffix_ = optional_string(model, "end_of_word_suffix", where).value_or("");

  // Vocabulary.
  const auto& vocab = model["vocab"];
  read_vocab(vocab, where, bpe->tokens_, bpe->has_token_);
  bpe->vocab_.reserve(vocab.size());
  for (size_t id = 0; id < bpe->tokens_.size(); ++id) {
    if (bpe->has_token_[id]) bpe->vocab_.emplace(bpe->tokens_[id], static_cast<int32_t>(id));
  }

  if (const auto unk = optional_string(model, "unk_token", where)) {
    const auto id = bpe->token_to_id(*unk);
    if (!id)
      throw_invalid_argument(where + ".unk_token " + nlohmann::json(*unk).dump() + " is not in " + where + ".vocab");
    bpe->unk_id_ = *id;
  }

  // Merges, by rank (their index); a pair listed twice keeps the later rank, as Hugging Face's
  // HashMap collect does.
  const auto& merges = model["merges"];
  bpe->merges_.reserve(merges.size());
  const size_t prefix_len = bpe->continuing_subword_prefix_.size();
  std::string merged;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& m = merges[rank];
    const std::string at = where + ".merges[" + std::to_string(rank) + "]";
    const auto [a, b] = merge_pair(m, at);
    const auto a_id = bpe->token_to_id(a);
    const auto b_id = bpe->token_to_id(b);
    merged = a;
    merged.append(prefix_len > 0 && b.compare(0, prefix_len, bpe->continuing_subword_prefix_) == 0
                      ? std::string_view(b).substr(prefix_len)
                      : std::string_view(b));
    const auto merged_id = bpe->token_to_id(merged);
    const std::string* missing = !a_id ? &a : !b_id ? &b : !merged_id ? &merged : nullptr;
    if (missing != nullptr) {
      throw_invalid_argument(at + " " + describe(m) + " names token " + nlohmann::json(*missing).dump() +
                             ", which is not in " + where + ".vocab");
    }
    bpe->merges_.insert_or_assign(*a_id, *b_id, Merge{static_cast<int32_t>(rank), *merged_id});
  }

  // The byte fast path: every byte's character is a token and no affix changes the symbols.
  bpe->bytes_direct_ = byte_level_input && prefix_len == 0 && bpe->end_of_word_suffix_.empty();
  for (int b = 0; b < 256; ++b) {
    const auto id = bpe->token_to_id(byte_level::byte_to_utf8(static_cast<uint8_t>(b)));
    bpe->byte_ids_[b] = id.value_or(-1);
    if (!id) bpe->bytes_direct_ = false;
  }
  return bpe;
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

// ------------------------------------------------------------------------------------------------
// Tokenizing

void Bpe::text_symbols(std::string_view text, std::vector<int32_t>& symbols) const {
  // Hugging Face's BPE::merge_word: one symbol per character (with the subword prefix on all but
  // the first and the suffix on the last); an unknown character becomes its <0xXX> byte tokens
  // (byte_fallback), else unk (consecutive ones fused with fuse_unk), else it is dropped.
  std::string piece;
  std::optional<int32_t> pending_unk;
  size_t i = 0;
  while (i < text.size()) {
    const size_t begin = i;
    i += utf8::sequence_length(static_cast<unsigned char>(text[i]));
    piece.clear();
    if (begin > 0) piece += continuing_subword_prefix_;
    piece.append(text.substr(begin, i - begin));
    if (i >= text.size()) piece += end_of_word_suffix_;
    if (const auto id = token_to_id(piece)) {
      if (pending_unk) symbols.push_back(*std::exchange(pending_unk, std::nullopt));
      symbols.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      const size_t mark = symbols.size();
      bool all = true;
      char name[8];
      for (const char c : piece) {
        std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned char>(c));
        const auto id = token_to_id(name);
        if (!id) {
          all = false;
          break;
        }
        symbols.push_back(*id);
      }
      if (all) {
        // Hugging Face adds these without flushing a pending unk first; the unk follows them.
        continue;
      }
      symbols.resize(mark);
    }
    if (unk_id_) {
      if (pending_unk && !fuse_unk_) symbols.push_back(*pending_unk);
      pending_unk = *unk_id_;
    } else if (unknown_separates_) {
      symbols.push_back(kUnknownSymbol);
    }
  }
  if (pending_unk) symbols.push_back(*pending_unk);
}

void Bpe::merge(std::vector<int32_t>& symbols) const {
  if (symbols.size() < 2) return;
  if (symbols.size() > heap_threshold_) {
    merge_heap(symbols);
  } else {
    merge_linear(symbols);
  }
}

void Bpe::merge_linear(std::vector<int32_t>& symbols) const {
  // ranks[i]: the merge of (symbols[i], symbols[i+1]); repeatedly apply the lowest-ranked one,
  // leftmost first. Quadratic, but words are short and this touches one small array.
  thread_local std::vector<Merge> ranks;
  ranks.resize(symbols.size() - 1);
  auto pair_merge = [&](size_t i) {
    const Merge* m = merges_.find(symbols[i], symbols[i + 1]);
    return m != nullptr ? *m : Merge{INT32_MAX, -1};
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) ranks[i] = pair_merge(i);
  while (!ranks.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < ranks.size(); ++i) {
      if (ranks[i].rank < ranks[best].rank) best = i;
    }
    if (ranks[best].rank == INT32_MAX) break;
    symbols[best] = ranks[best].id;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best));
    if (best < ranks.size()) ranks[best] = pair_merge(best);
    if (best > 0) ranks[best - 1] = pair_merge(best - 1);
  }
}

void Bpe::merge_heap(std::vector<int32_t>& symbols) const {
  // Hugging Face's Word::merge_all: a min-heap of candidate merges by (rank, position); entries
  // made stale by earlier merges are recognised and skipped when popped. A candidate is one
  // integer, rank << 32 | position, so the heap compares plain integers.
  const auto n = static_cast<int32_t>(symbols.size());
  // Per-thread buffers: long words (CJK runs, long identifiers) are the common users of this path.
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<uint64_t> heap;
  prev.resize(n);
  next.resize(n);
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  auto push = [&](int32_t left) {
    const int32_t right = next[left];
    if (right < 0) return;
    if (const Merge* m = merges_.find(symbols[left], symbols[right])) {
      heap.push_back(static_cast<uint64_t>(m->rank) << 32 | static_cast<uint32_t>(left));
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto rank = static_cast<int32_t>(top >> 32);
    const auto pos = static_cast<int32_t>(top & 0xFFFFFFFFu);
    // prev[pos] == -2 marks a symbol merged into its left neighbour.
    if (prev[pos] == -2 || next[pos] < 0) continue;
    const int32_t right = next[pos];
    const Merge* m = merges_.find(symbols[pos], symbols[right]);
    if (m == nullptr || m->rank != rank) continue;  // stale: the pair changed since it was queued
    symbols[pos] = m->id;
    prev[right] = -2;
    next[pos] = next[right];
    if (next[pos] >= 0) prev[next[pos]] = pos;
    if (prev[pos] >= 0) push(prev[pos]);
    push(pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (bytes_direct_ && word.size() == 1) {
    ids.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  const bool cacheable = cache_enabled_ && word.size() <= kMaxCachedBytes;
  const size_t hash = cacheable ? std::hash<std::string_view>{}(word) : 0;
  if (cacheable && cache_.find(word, hash, ids)) return;

  thread_local std::string mapped;
  std::string_view text = word;
  if (byte_level_input_ && (ignore_merges_ || !bytes_direct_)) {
    mapped.clear();
    byte_level::encode(word, mapped);
    text = mapped;
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  std::optional<int32_t> whole;
  if (ignore_merges_) whole = token_to_id(text);
  if (whole) {
    symbols.push_back(*whole);
  } else if (bytes_direct_) {
    for (const char c : word) symbols.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    merge(symbols);
  } else {
    text_symbols(text, symbols);
    merge(symbols);
    if (unknown_separates_) symbols.erase(std::remove(symbols.begin(), symbols.end(), kUnknownSymbol), symbols.end());
  }
  if (cacheable) cache_.insert(word, hash, symbols.data(), symbols.size());
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

}  // namespace ditto
