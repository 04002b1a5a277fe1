// The front door: every request — from the server, the CLI, the C++ or the Python API — becomes an
// engine request here and nowhere else. Chat messages are rendered with the model's chat template,
// text is tokenized, token ids are checked against the vocabulary, the prompt against the context,
// max_tokens is resolved, the sampling parameters are validated and the request is checked to fit
// the KV cache. Every refusal is an Error(kInvalidArgument) whose param() names the request field
// at fault (OpenAI's names: "prompt", "messages", "max_tokens", "top_p", ...).
// Thread-safety: process() is const and may run on many threads at once (the server's HTTP
// threads); the tokenizer and chat template it reads are immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ditto/prompt_input.h"
#include "ditto/sampling_params.h"
#include "engine/generation_defaults.h"
#include "engine/output_parsers.h"
#include "engine/pooling.h"
#include "engine/structured_output.h"

namespace ditto {

class ChatTemplate;
class Tokenizer;

// A request ready for Engine::add(): tokens in the vocabulary, prompt within the context,
// parameters valid, max_tokens resolved, and the whole fitting the KV cache alone.
struct EngineRequest {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  std::string prompt;  // the prompt as text: given, or the rendered chat; "" for token ids
  SamplingParams params;
  // How the output is split into a chat message's fields (CompletionOutput::message); off unless a
  // front end turns them on (the server's --reasoning-parser / --tool-call-parser, chat only).
  ChatOutputParsers output_parsers;
  // ≥ 0: prompt positions from this one on are scored as sampled outputs (GenerateOptions::
  // rescore_from); -1: plain prompt_logprobs.
  int64_t rescore_from = -1;
  // Set: a pooling request (process_pooling): the prompt runs to its end and the request finishes
  // with RequestOutput::pooled instead of sampling; params then holds max_tokens 0 and seed 0.
  std::optional<PoolingSpec> pooling;
  // Set when params.structured_outputs is: the constraint compiled (engine/structured_output.h),
  // from which the engine clones one matcher per choice.
  std::shared_ptr<const StructuredOutputGrammar> grammar;
};

// The bounds a request is checked against (one set for every front door, docs/ARCHITECTURE.md).
struct InputLimits {
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;                 // tokens of context: prompt + output (≤ max_position_embeddings)
  bool max_model_len_is_model_limit = true;  // it is the model's max_position_embeddings (for messages)
  int64_t max_logprobs = 20;                 // vLLM's max_logprobs: top-N for logprobs and prompt_logprobs
  int64_t block_size = 16;                   // KV cache block, tokens
  int64_t num_kv_blocks = 0;                 // the KV cache, in blocks
};

// A seed for a request that gave none: 53 random bits from the operating system's random device,
// so that a client reading it back as a JSON number (JavaScript, jq: doubles) repeats the answer.
uint64_t draw_seed();

class InputProcessor {
 public:
  // tokenizer may be null (token-id prompts only, no stop strings); chat_template may be null
  // (chat messages are refused). Both must outlive the processor. `defaults`: the model's
  // generation_config.json values (model_files.h), which every front end starts its requests from.
  // `pooler`: the model's pooling (engine/pooling.h), which process_pooling resolves requests against.
  // `eos_token_ids`: the ids that end generation, which a complete structured output allows (none:
  // structured outputs are refused).
  InputProcessor(const InputLimits& limits, const Tokenizer* tokenizer, const ChatTemplate* chat_template,
                 GenerationDefaults defaults = {}, PoolerConfig pooler = {}, std::vector<int32_t> eos_token_ids = {});

  // SamplingParams() with the model's defaults (generation_config) applied: what every front end
  // fills a request's own fields into, so a field a request leaves out means the same everywhere.
  SamplingParams default_sampling_params() const;
  const GenerationDefaults& generation_defaults() const { return defaults_; }

  // Turns `prompt` and `params` into an engine request (request_id left empty). Throws
  // Error(kInvalidArgument) with param() set: "prompt" / "messages" for a prompt that is not
  // exactly one kind, fails to render or encode, is empty, holds a token outside the vocabulary or
  // leaves no room in the context; "max_tokens" for one that does not fit (kAsGiven) or a request
  // the KV cache cannot hold alone; the sampling field at fault otherwise.
  // `max_tokens_field` is the name the caller read max_tokens under (chat: "max_completion_tokens").
  // A request without params.seed gets one here (draw_seed), the one place it is drawn.
  // params.structured_outputs is compiled here (r.grammar); one that does not compile is refused
  // with param() "structured_outputs.<kind>" and the grammar engine's reason.
  EngineRequest process(const PromptInput& prompt, SamplingParams params, MaxTokensRule rule,
                        const std::string& max_tokens_field = "max_tokens") const;

  // A pooling request (an embedding or a score) for `prompt`: the prompt encoded and cut to
  // params.truncate_prompt_tokens, then checked like process() does, except that it may fill the
  // whole context (it generates nothing). Throws Error(kInvalidArgument) with param() set: "model"
  // when the model does not pool (no --runner pooling), "task" / "dimensions" / "normalize" /
  // "truncate_prompt_tokens" for a bad parameter, "input" for an empty prompt, a token outside the
  // vocabulary, or a prompt longer than the context (the message says to set
  // truncate_prompt_tokens), one the KV cache cannot hold.
  EngineRequest process_pooling(const PromptInput& prompt, const PoolingParams& params) const;
  const PoolerConfig& pooler() const { return pooler_; }

  // The prompt's token ids and text alone (what process() does before any check of length or
  // parameters; /tokenize). Throws as process() for the prompt.
  std::pair<std::vector<int32_t>, std::string> encode(const PromptInput& prompt) const;

  // The token sequences `words` ban (SamplingParams::bad_words, vLLM's rule): each word
  // left-stripped, and again with a leading space when that gives as many tokens and another first
  // one. Throws Error(kInvalidArgument, param "bad_words") for a word that is only white space, or
  // kNotFound without a tokenizer.
  std::vector<std::vector<int32_t>> bad_words_token_ids(const std::vector<std::string>& words) const;

  // The text of `ids` (special tokens kept unless skip_special_tokens; /detokenize, the echo of a
  // token-id prompt, Python's tokenizer.decode), and each id's vocabulary string ("" for an id
  // with none; /tokenize's token_strs). Ids must be in the vocabulary. These and the lookups below
  // throw Error(kNotFound) when the model has no tokenizer.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  std::vector<std::string> token_strings(std::span<const int32_t> ids) const;
  // The vocabulary both ways (nullopt: no such id / token), the BOS id the tokenizer adds, and
  // tokenizer_config.json as the tokenizer read it (a GGUF file's: built from its tokenizer keys).
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(const std::string& token) const;
  std::optional<int32_t> bos_token_id() const;
  const nlohmann::json& tokenizer_config() const;

  // The vocabulary as the grammar engine sees it, built on first use (thread-safe). Throws
  // Error(kInvalidArgument, param "structured_outputs") without a tokenizer or EOS ids.
  std::shared_ptr<const GrammarVocabulary> grammar_vocabulary() const;

  const InputLimits& limits() const { return limits_; }
  const Tokenizer* tokenizer() const { return tokenizer_; }

 private:
  std::string render_chat(const PromptInput& prompt) const;
  const Tokenizer& need_tokenizer() const;
  void truncate_prompt(EngineRequest& r, std::optional<int64_t> truncate_prompt_tokens,
                       const std::string& truncation_side) const;

  InputLimits limits_;
  const Tokenizer* tokenizer_;
  const ChatTemplate* chat_template_;
  GenerationDefaults defaults_;
  PoolerConfig pooler_;
  std::vector<int32_t> eos_token_ids_;
  struct LazyGrammarVocabulary;
  std::shared_ptr<LazyGrammarVocabulary> grammar_vocab_;  // shared by copies of this processor
};

}  // namespace ditto
