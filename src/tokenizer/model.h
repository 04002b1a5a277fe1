// The tokenizer.json "model": what turns one pre-token into ids. Two implementations:
//   - Bpe (bpe.h), Hugging Face's "BPE": merges applied by rank, optional byte_fallback;
//   - Spm (spm.h), ditto's "ditto_spm": llama.cpp's SentencePiece tokenizer, which merges
//     adjacent symbols by the score of the token they make (GGUF tokenizer.ggml.model "llama").
// The Tokenizer and the AddedVocabulary see only this interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

// Token ids are below this bound (2^24): they index dense per-id tables.
inline constexpr int64_t kMaxTokenId = int64_t{1} << 24;

class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;

  // Appends the ids of one pre-token (non-empty). Thread-safe. Throws Error(kInvalidArgument)
  // only where a model says so (Spm: a character that needs a byte token the vocabulary lacks).
  virtual void tokenize(std::string_view word, std::vector<int32_t>& ids) const = 0;

  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // The token string of `id`, or nullptr when the vocabulary has no such id.
  virtual const std::string* id_to_token(int32_t id) const = 0;
  // Largest id in the vocabulary plus one (0 for an empty vocabulary).
  virtual int32_t id_limit() const = 0;
};

}  // namespace ditto
