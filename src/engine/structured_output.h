// Structured outputs (SamplingParams::structured_outputs): a request's constraint compiled by the
// grammar engine, llguidance (crates.io, MIT; docs/STRUCTURED_OUTPUTS.md says why it and what it
// costs), into a matcher per choice that says which tokens may come next.
//
// Invariance by construction: a matcher's state is a function of the compiled constraint and the
// tokens it accepted — its own choice's output tokens, in order — and nothing else, so the mask a
// row gets never depends on the batch, the order, chunking, the prefix cache, preemption or
// speculation (guesses are consumed only to compute their rows' masks, then rolled back).
// Thread-safety: a GrammarVocabulary and a StructuredOutputGrammar are immutable and may be shared
// by threads; a GrammarMatcher is for one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ditto/sampling_params.h"

struct LlgTokenizer;
struct LlgMatcher;

namespace ditto {

class Tokenizer;

// The vocabulary as the grammar engine sees it: every token id's bytes (a special token's are
// marked so that no text matches them) and the ids that end the output.
class GrammarVocabulary {
 public:
  // vocab_size: the model's logit rows (≥ tokenizer.vocab_size(); the ids past the tokenizer's are
  // never allowed). eos_token_ids: the ids that end generation (the first is the one a finished
  // grammar allows; every one ends it). Throws Error(kInvalidArgument) if llguidance refuses the
  // vocabulary (its message), or eos_token_ids is empty or outside the vocabulary.
  GrammarVocabulary(const Tokenizer& tokenizer, int64_t vocab_size, std::vector<int32_t> eos_token_ids);
  ~GrammarVocabulary();
  GrammarVocabulary(const GrammarVocabulary&) = delete;
  GrammarVocabulary& operator=(const GrammarVocabulary&) = delete;

  int64_t vocab_size() const { return vocab_size_; }
  // uint32 words of a mask: ceil(vocab_size / 32).
  size_t mask_words() const { return static_cast<size_t>((vocab_size_ + 31) / 32); }
  const std::vector<int32_t>& eos_token_ids() const { return eos_token_ids_; }
  LlgTokenizer* handle() const { return handle_; }

 private:
  const Tokenizer& tokenizer_;  // llguidance's tokenize callback encodes with it
  int64_t vocab_size_;
  std::vector<int32_t> eos_token_ids_;
  LlgTokenizer* handle_ = nullptr;
};

class GrammarMatcher;

// One request's constraint, compiled: the prototype every choice's matcher is cloned from.
class StructuredOutputGrammar {
 public:
  // Compiles `params` (validated: exactly one kind) for `vocab`. Throws Error(kInvalidArgument)
  // whose param() is "structured_outputs.<kind>" and whose message is the grammar engine's reason
  // (an invalid or unsupported JSON Schema, a regex that does not compile, a grammar with a syntax
  // error or in GBNF, a schema nested deeper than kMaxJsonDepth or with an object of more than
  // kMaxOptionalProperties optional properties, one longer than kMaxConstraintBytes, one whose
  // first token mask exceeds the engine's limits), before any work is scheduled.
  static std::shared_ptr<const StructuredOutputGrammar> compile(const StructuredOutputsParams& params,
                                                                std::shared_ptr<const GrammarVocabulary> vocab);
  ~StructuredOutputGrammar();

  // A matcher at the start of the output.
  std::unique_ptr<GrammarMatcher> new_matcher() const;
  const GrammarVocabulary& vocabulary() const { return *vocab_; }
  const std::string& kind() const { return kind_; }

  // JSON Schemas nested deeper than this are refused (serde_json's own recursion limit is 128).
  static constexpr int kMaxJsonDepth = 100;
  // An object of a JSON Schema with more optional properties (not "required") is refused: the
  // grammar engine's cost grows with their square (structured_output.cc).
  static constexpr size_t kMaxOptionalProperties = 400;
  // Constraints longer than this (as the grammar engine reads them: the schema's JSON text, the
  // regex, the grammar) are refused: compiling grows with the size, to seconds at a megabyte.
  static constexpr size_t kMaxConstraintBytes = 256 * 1024;

 private:
  StructuredOutputGrammar() = default;
  std::shared_ptr<const GrammarVocabulary> vocab_;
  std::string kind_;
  LlgMatcher* prototype_ = nullptr;
};

// One choice's position in the constraint.
class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const GrammarVocabulary> vocab, LlgMatcher* handle);
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  // Writes the tokens allowed next into `mask` (mask_words() uint32: bit t % 32 of word t / 32 set
  // = token t allowed; once the constraint is complete, only the EOS id). Returns false, leaving
  // `mask` all zero, when the matcher has failed (error() says why).
  bool fill_mask(std::span<uint32_t> mask);
  // Advances over `token`. Returns false when the constraint does not allow it (the matcher has
  // then failed: error()). An EOS id after the constraint is complete is accepted and changes
  // nothing (the constraint stops by itself at its last token: is_stopped()).
  bool accept(int32_t token);
  // Undoes the last `n` accepted tokens (speculative guesses). Returns false on failure.
  bool rollback(int64_t n);
  // How many leading tokens of `tokens` the constraint allows from here (no state change).
  int64_t valid_prefix(std::span<const int32_t> tokens);
  // The constraint is complete and nothing may follow (an accepted EOS, or a grammar that ends).
  bool is_stopped() const;
  bool failed() const;
  // The grammar engine's reason for a failure ("" when none).
  std::string error() const;

 private:
  std::shared_ptr<const GrammarVocabulary> vocab_;
  LlgMatcher* handle_;
};

// Whether token `t` is set in `mask` (GrammarMatcher::fill_mask's layout).
inline bool mask_allows(std::span<const uint32_t> mask, int32_t t) {
  return ((mask[static_cast<size_t>(t) / 32] >> (static_cast<uint32_t>(t) % 32)) & 1u) != 0;
}

// `text` with every regex meta character escaped (Rust regex syntax), so that it matches itself.
std::string escape_regex(const std::string& text);

}  // namespace ditto
