// The "ditto_spm" model: llama.cpp's SentencePiece (SPM) tokenizer, for GGUF vocabularies with
// tokenizer.ggml.model = "llama" (Llama 2, Mistral v0.1-v0.3, Gemma, Phi-3, TinyLlama, ...).
//
// Semantics follow llama.cpp's llm_tokenizer_spm_session (src/llama-vocab.cpp), which reproduces
// SentencePiece's BPE encoding (bpe_model.cc) without a merges list:
//   1. The text (already normalized: spaces written as U+2581 "▁", see normalizer.h) is split
//      into one symbol per UTF-8 character.
//   2. Every pair of adjacent symbols whose concatenated text is a token of the vocabulary is a
//      candidate, with that token's score. The candidate with the highest score is merged first;
//      among equal scores, the leftmost. Merging creates new candidates with the neighbours;
//      candidates that an earlier merge made stale are skipped. Any token can be formed this way,
//      whatever its type.
//   3. Each final symbol is its token; a symbol that is no token (a single character outside the
//      vocabulary) becomes the byte tokens "<0xXX>" of its UTF-8 bytes (byte fallback; an ASCII
//      byte with no byte token may use the one-character token of that byte, as llama.cpp does).
//      There is no unknown token: llama.cpp never emits one for SPM.
//
// tokenizer.json form (ditto's own; Hugging Face has no such model type):
//   {"type": "ditto_spm", "vocab": [["<unk>", 0.0], ["▁the", -1.5], ...]}
// where the index in "vocab" is the token id and the number is the token's score (float32).
// tokenizer/gguf_vocab.cc writes it from tokenizer.ggml.tokens and tokenizer.ggml.scores.
//
// Cost: O(n log n) in the characters of the piece (a binary heap of candidates), one hash lookup
// per candidate; there is no word cache, as the model sees whole sections of text (SentencePiece
// has no pre-tokenizer).
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/model.h"

namespace ditto {

class Spm : public TokenizerModel {
 public:
  // Parses the "model" object; `where` names it in errors (e.g. "x.gguf: model"). Throws
  // Error(kInvalidArgument) naming the entry for: a type other than "ditto_spm", a "vocab" that is
  // not an array of [string, number] pairs, a score outside float32's range, an empty or repeated
  // token, more than 2^24 tokens.
  static std::unique_ptr<Spm> from_json(const nlohmann::json& model, const std::string& where);

  // Appends the ids of `text` (valid UTF-8, non-empty). Throws Error(kInvalidArgument) when a
  // character outside the vocabulary needs a byte token "<0xXX>" the vocabulary lacks (naming the
  // character and the token). Thread-safe.
  void tokenize(std::string_view text, std::vector<int32_t>& ids) const override;

  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  int32_t id_limit() const override { return static_cast<int32_t>(tokens_.size()); }
  // The score of `id` (a valid id).
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }

 private:
  Spm() = default;
  void byte_fallback(std::string_view character, std::vector<int32_t>& ids) const;

  std::string where_;
  std::vector<std::string> tokens_;                      // [vocab_size] by id
  std::vector<float> scores_;                            // [vocab_size] by id
  std::unordered_map<std::string_view, int32_t> vocab_;  // views into tokens_
  std::array<int32_t, 256> byte_ids_{};                  // "<0xXX>" (else the byte's own token) or -1
};

}  // namespace ditto
