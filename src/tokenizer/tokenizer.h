// ditto's tokenizer: a Hugging Face tokenizer.json (byte-level BPE as in the Qwen2/Qwen3 and
// Llama-3 families) with the ids of Hugging Face `tokenizers`, and the text of transformers'
// decode. The pipeline of encode() is Hugging Face's TokenizerImpl::encode_single_sequence:
//
//   added tokens split the raw text (added_vocabulary.h) -> each other piece is normalized
//   (normalizer.h) -> pre-tokenized (pre_tokenizer.h) -> each pre-token goes through the model
//   (bpe.h) -> post-processor (post_processor.h, only with add_special_tokens).
//
// decode() is Hugging Face's decode (added tokens by content, skip_special_tokens, the decoder in
// decoder.h) followed by transformers' clean_up_tokenization when clean_up_tokenization_spaces.
// IncrementalDetokenizer streams the same text token by token.
//
// Supported components (anything else fails at load, naming the component and the file):
// normalizer NFC/NFD/NFKC/NFKD/Prepend/Replace/Sequence/null; pre_tokenizer Split (Regex or String
// pattern, any behavior, invert)/ByteLevel/Metaspace/Sequence/null; model BPE (with byte_fallback)
// or ditto's own ditto_spm (llama.cpp's score-driven SentencePiece merges, spm.h, for GGUF "llama"
// vocabularies); post_processor TemplateProcessing/BertProcessing/RobertaProcessing/ByteLevel/
// Sequence/null; decoder ByteLevel, or Replace/ByteFallback/Fuse/Strip/Metaspace (the
// SentencePiece family, decoder.h), Sequence, null.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

class AddedVocabulary;
class Decoder;
class TokenizerModel;
class Normalizer;
class PostProcessor;
class PreTokenizer;

class Tokenizer {
 public:
  // Loads `model_dir`/tokenizer.json and, when present, `model_dir`/tokenizer_config.json (for
  // clean_up_tokenization_spaces and the bos/eos token strings). Only these two files are read.
  // Throws Error(kNotFound) when tokenizer.json is missing; Error(kInvalidArgument) naming the
  // file and the component, field, regex (with PCRE2's message and offset) or merge at fault for
  // malformed JSON or an unsupported or broken component.
  static std::unique_ptr<Tokenizer> load(const std::string& model_dir);

  // The same from the text of a tokenizer.json; `source` names it in errors (e.g. a path).
  static std::unique_ptr<Tokenizer> from_json(const std::string& tokenizer_json_text, const std::string& source,
                                              const nlohmann::json& tokenizer_config = {});

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // The ids of `text` (UTF-8) as Hugging Face's tokenizer(text, add_special_tokens=...).input_ids:
  // with add_special_tokens the post-processor's template (e.g. Llama-3's <|begin_of_text|>) is
  // applied; special tokens written in the text are always recognised. Throws
  // Error(kInvalidArgument) when `text` is not valid UTF-8 (naming the byte offset).
  // Thread-safe: may be called concurrently.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;

  // The text of `ids` as transformers' tokenizer.decode(ids, skip_special_tokens=...,
  // clean_up_tokenization_spaces=...): bytes that are not valid UTF-8 become U+FFFD as Python's
  // bytes.decode("utf-8", errors="replace"); ids that name no token are skipped (as Hugging
  // Face's decode does); clean_up_tokenization_spaces nullopt takes tokenizer_config.json's value
  // (false when absent, transformers' current default). Thread-safe.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false,
                     std::optional<bool> clean_up_tokenization_spaces = std::nullopt) const;

  // Largest token id plus one, added tokens included.
  int64_t vocab_size() const;
  // The id of a token string (added tokens first, then the model's vocabulary).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string of an id (byte-level form, e.g. "Ġhello"), or nullopt for an unused id.
  std::optional<std::string> id_to_token(int32_t id) const;
  // The bytes the id contributes to a decode (for a byte-level BPE token, its raw bytes, which may
  // be part of a UTF-8 character); empty for an unused id.
  std::string token_bytes(int32_t id) const;
  // True for added tokens marked "special" (those skip_special_tokens drops).
  bool is_special(int32_t id) const;
  // tokenizer_config.json as loaded ({} when absent).
  const nlohmann::json& tokenizer_config() const { return config_; }
  // tokenizer_config.json's eos_token (a string, {"content": ...}, or a list of those) as ids;
  // empty when absent or not a known token.
  std::vector<int32_t> eos_token_ids() const { return eos_token_ids_; }
  // tokenizer_config.json's bos_token as an id (nullopt when absent, null or unknown).
  std::optional<int32_t> bos_token_id() const { return bos_token_id_; }
  // clean_up_tokenization_spaces of tokenizer_config.json (false when absent).
  bool clean_up_tokenization_spaces() const { return clean_up_tokenization_spaces_; }

 private:
  friend class IncrementalDetokenizer;
  Tokenizer();

  // Encodes text between added tokens: normalize, split on normalized added tokens, pre-tokenize,
  // the model. `at_text_start`: the section begins the text given to encode().
  void encode_section(std::string_view section, bool at_text_start, std::vector<int32_t>& ids) const;
  void encode_normalized(std::string_view text, bool at_text_start, std::vector<int32_t>& ids) const;
  // Bytes id contributes to a decode, or nullptr when the id is skipped (unknown, or special with
  // skip_special_tokens).
  const std::string* decoded_bytes(int32_t id, bool skip_special_tokens) const;

  std::string source_;
  nlohmann::json config_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<TokenizerModel> model_;
  std::unique_ptr<AddedVocabulary> added_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  bool clean_up_tokenization_spaces_ = false;
  std::vector<std::string> token_bytes_;  // by id: what the decoder makes of the token
  std::vector<uint8_t> token_flags_;      // by id: kExists | kSpecial
  std::vector<int32_t> eos_token_ids_;
  std::optional<int32_t> bos_token_id_;
};

// Streaming decode for one sequence: add() returns the text that became final with this token —
// only complete UTF-8 characters, never text a later token could still change — and finish()
// the rest. The concatenation of every add() and finish() equals tokenizer.decode(all ids,
// skip_special_tokens, clean_up_tokenization_spaces), U+FFFD replacements included. Output lags
// the input by at most one incomplete character, and with clean-up by about one word (until a
// boundary no clean-up rule can cross, see CleanUpStream). Not thread-safe (one object per
// stream); `tokenizer` must outlive it.
class IncrementalDetokenizer {
 public:
  // clean_up_tokenization_spaces nullopt: tokenizer_config.json's value, as in decode().
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false,
                                  std::optional<bool> clean_up_tokenization_spaces = std::nullopt);
  ~IncrementalDetokenizer();

  std::string add(int32_t id);
  // Flushes what is held back (an incomplete UTF-8 sequence becomes U+FFFD) and resets the
  // stream, so the object can decode a new sequence.
  std::string finish();

 private:
  struct State;
  void strip(State& s) const;
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  bool clean_up_tokenization_spaces_;
  std::unique_ptr<State> state_;
};

}  // namespace ditto
