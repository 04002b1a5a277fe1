// The tokenizer part of a GGUF file, as llama.cpp's convert_hf_to_gguf.py writes it for a byte-level
// BPE tokenizer (conversion/base.py get_vocab_base, gguf-py/gguf/vocab.py SpecialVocab): tokenizer
// "gpt2", tokens padded to vocab_size with "[PAD<i>]", token types, merges, the pre-tokenizer named
// by its split regex, special ids and add_*_token flags as SpecialVocab reads them, the chat template.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/gguf_writer.h"

namespace ditto {

// An insertion-ordered map, as the converter's Python dicts are.
template <typename V>
struct OrderedMap {
  std::vector<std::pair<std::string, V>> items;
  V* find(const std::string& k) {
    for (auto& [key, v] : items) {
      if (key == k) return &v;
    }
    return nullptr;
  }
  void set(const std::string& k, V v) {
    if (V* p = find(k))
      *p = std::move(v);
    else
      items.emplace_back(k, std::move(v));
  }
};

struct GgufVocab {
  std::string pre;
  std::vector<std::string> tokens;   // [vocab_size]
  std::vector<int32_t> token_types;  // [vocab_size]
  std::vector<std::string> merges;   // "left right"
  OrderedMap<uint32_t> special_ids;  // "bos" -> id, in the order SpecialVocab finds them
  OrderedMap<bool> add_special;      // "bos" -> add_bos_token
  nlohmann::json chat_template;      // string, list of {name, template}, or null
  std::optional<bool> lowercase, strip_accents;
  std::optional<bool> add_prefix_space;  // tokenizer_config.json's, when a boolean
};

// Reads `dir`'s tokenizer.json, tokenizer_config.json (and chat_template.jinja / chat_template.json
// when it has no chat_template); `config` (config.json) supplies special token ids neither names.
// Throws Error(kNotFound) without tokenizer.json, Error(kInvalidArgument) naming the file for a
// tokenizer GGUF cannot hold (not byte-level BPE, an unknown pre-tokenizer regex, ids outside
// vocab_size) or a malformed one.
GgufVocab read_gguf_vocab(const std::string& dir, const nlohmann::json& config, int64_t vocab_size);

// Writes the tokenizer.* keys, in the converter's order.
void add_gguf_vocab(GgufWriter& w, const GgufVocab& v);

}  // namespace ditto
