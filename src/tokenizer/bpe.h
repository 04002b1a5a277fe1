// The tokenizer.json "model" of type BPE: vocabulary, merges by rank, ignore_merges, unk_token
// (with fuse_unk), byte_fallback, continuing_subword_prefix / end_of_word_suffix, and a word cache.
// Semantics follow Hugging Face tokenizers' models/bpe/model.rs and word.rs: the pair with the
// lowest merge rank is merged first, the leftmost one among equal ranks; a merges list naming a
// pair twice keeps the later rank. Rejected at load: a non-zero dropout (not deterministic).
//
// One field is ditto's own: "ditto_unknown_separates": true makes a character outside the
// vocabulary (with no unk_token or byte fallback to stand for it) still yield no id, as in Hugging
// Face, but keep the characters on its two sides from merging across it, as llama.cpp's
// llm_tokenizer_bpe does (src/llama-vocab.cpp). tokenizer/gguf_vocab.cc sets it for GGUF vocabularies,
// many of which lack a few byte-level characters (SmolLM2: the bytes 0x04, 0x06, 0x13, ...).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/model.h"

namespace ditto {

class Bpe : public TokenizerModel {
 public:
  // Parses the "model" object. `where` names it in errors (e.g. "tokenizer.json: model").
  // `byte_level_input`: the pre-tokenizer ends with ByteLevel, so tokenize() receives raw bytes
  // that stand for their GPT-2 byte-level characters (see byte_level.h).
  // Throws Error(kInvalidArgument) for a model type other than BPE (naming it), a malformed vocab
  // or merges entry, a merge naming a token missing from the vocab (with the merge's index and
  // text), an unk_token missing from the vocab, and a non-zero dropout.
  static std::unique_ptr<Bpe> from_json(const nlohmann::json& model, const std::string& where, bool byte_level_input);

  // Appends the ids of one pre-token (non-empty). With byte_level_input, `word` holds raw bytes
  // and each byte stands for its byte-level character (the mapped string is never built on the
  // common path); otherwise `word` is text whose characters are the initial symbols.
  // Thread-safe (the word cache is locked per shard).
  void tokenize(std::string_view word, std::vector<int32_t>& ids) const override;

  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  int32_t id_limit() const override { return static_cast<int32_t>(tokens_.size()); }

  // Words of more than this many symbols are merged with a priority queue, shorter ones by a
  // linear scan (same result; exposed so tests can compare the two).
  void set_heap_threshold_for_testing(size_t n) { heap_threshold_ = n; }
  void set_cache_enabled_for_testing(bool enabled) { cache_enabled_ = enabled; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // the merged token
  };
  // Open-addressing map from a (left id, right id) pair to its merge: the hot lookup of BPE. Key
  // and value share a 16-byte slot so a probe touches one cache line; at most half full.
  class PairMap {
   public:
    void reserve(size_t n);
    void insert_or_assign(int32_t left, int32_t right, Merge merge);
    const Merge* find(int32_t left, int32_t right) const;

   private:
    struct Slot {
      uint64_t key;  // kEmpty marks a free slot
      Merge merge;
    };
    static uint64_t key(int32_t l, int32_t r) {
      return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
    }
    size_t slot(uint64_t k) const;
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
  };
  // Words already tokenized, shared by all threads: one mutex per shard so concurrent encodes
  // rarely wait. Stops growing at capacity (as Hugging Face's cache does); results never depend
  // on it.
  class WordCache {
   public:
    bool find(std::string_view word, size_t hash, std::vector<int32_t>& ids) const;
    void insert(std::string_view word, size_t hash, const int32_t* ids, size_t n) const;

   private:
    static constexpr size_t kShards = 16;
    static constexpr size_t kCapacityPerShard = 8192;
    struct StringHash {
      using is_transparent = void;
      size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    struct Shard {
      std::mutex mutex;
      std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
    };
    mutable std::array<Shard, kShards> shards_;
  };

  Bpe() = default;
  // Initial symbols of a word given as text (the general path, Hugging Face's merge_word).
  void text_symbols(std::string_view text, std::vector<int32_t>& symbols) const;
  void merge(std::vector<int32_t>& symbols) const;
  void merge_linear(std::vector<int32_t>& symbols) const;
  void merge_heap(std::vector<int32_t>& symbols) const;

  std::vector<std::string> tokens_;                      // by id; ids the vocabulary skips hold ""
  std::vector<uint8_t> has_token_;                       // by id
  std::unordered_map<std::string_view, int32_t> vocab_;  // views into tokens_
  PairMap merges_;
  bool byte_level_input_ = false;
  bool bytes_direct_ = false;            // every byte's character is in the vocab, no affixes
  std::array<int32_t, 256> byte_ids_{};  // id of each byte's byte-level character
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool unknown_separates_ = false;  // "ditto_unknown_separates"
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  size_t heap_threshold_ = 48;
  bool cache_enabled_ = true;
  WordCache cache_;
};

}  // namespace ditto
