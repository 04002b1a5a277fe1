// Per-request sampling parameters, with vLLM's names, defaults and validation rules
// (vllm/sampling_params.py), so a vLLM user's request means the same thing here.
// Part of ditto's public C++ API (self-contained: the standard library only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ditto {

// What Engine::step() returns for a request (vLLM's RequestOutputKind): only the finished output,
// or after every step that produced something, what is new since the last report.
enum class RequestOutputKind { kFinalOnly, kDelta };

// Structured outputs (vLLM's StructuredOutputsParams, vllm/sampling_params.py): the output is
// constrained to a JSON Schema, a regular expression, one of a list of strings, a grammar, any JSON
// object, or a structural tag — exactly one of them. The grammar engine is llguidance
// (docs/STRUCTURED_OUTPUTS.md): `regex` is Rust regex syntax, `grammar` llguidance's Lark dialect
// (a GBNF grammar, written with "::=", is refused by name). The front door compiles it before any
// work is scheduled and refuses what does not compile with the engine's reason.
struct StructuredOutputsParams {
  std::optional<std::string> json;                 // a JSON Schema, as JSON text
  std::optional<std::string> regex;                // the whole output matches it
  std::optional<std::vector<std::string>> choice;  // the output is one of these strings
  std::optional<std::string> grammar;              // a Lark grammar (llguidance's dialect)
  bool json_object = false;                        // any JSON object (OpenAI's response_format json_object)
  std::optional<std::string> structural_tag;       // vLLM's structural tag, as JSON text
  // JSON only: no white space between tokens (vLLM's disable_any_whitespace), and objects without
  // "additionalProperties" take no others (vLLM's disable_additional_properties).
  bool disable_any_whitespace = false;
  bool disable_additional_properties = false;
  // JSON only: the white space allowed between tokens, a regex (vLLM's whitespace_pattern; unset:
  // llguidance's default, any JSON white space).
  std::optional<std::string> whitespace_pattern;

  // How many of the constraint kinds are set (json, regex, choice, grammar, json_object,
  // structural_tag); a request must set exactly one.
  int num_kinds() const;
  // The kind's field name: "json", "regex", "choice", "grammar", "json_object", "structural_tag"
  // ("" when none is set).
  std::string kind() const;
};

struct SamplingParams {
  // Limits every front door shares (server, CLI, C++ and Python API): OpenAI's bound on n, and
  // its bound on stop strings (vLLM has none; 16 keeps the per-token stop check cheap).
  static constexpr int64_t kMaxN = 128;   // choices per request (each is a sequence in the engine)
  static constexpr size_t kMaxStop = 16;  // stop strings per request
  int64_t n = 1;                          // independent choices per prompt (choice i has its own stream)
  float presence_penalty = 0.0f;          // [-2, 2]: subtracted once from every token already generated
  float frequency_penalty = 0.0f;         // [-2, 2]: subtracted per occurrence in the generated text
  float repetition_penalty = 1.0f;        // > 0: logits of prompt/generated tokens divided (if > 0) or multiplied
  float temperature = 1.0f;               // ≥ 0; 0 means greedy (argmax, ties to the lowest id)
  float top_p = 1.0f;                     // (0, 1]: smallest set of most likely tokens with this mass
  int64_t top_k = 0;                      // 0 or -1: off; else keep the k most likely tokens
  float min_p = 0.0f;                     // [0, 1]: drop tokens below min_p · p(most likely)
  std::optional<uint64_t> seed;           // none: drawn from the OS by the engine (and reported)
  std::vector<std::string> stop;          // stop strings, matched on the detokenized output
  std::vector<int32_t> stop_token_ids;    // extra stop tokens (generated, kept in token_ids)
  bool ignore_eos = false;                // keep going past EOS
  bool include_stop_str_in_output = false;
  int64_t max_tokens = 16;                 // ≥ 1 (vLLM's default)
  int64_t min_tokens = 0;                  // [0, max_tokens]: no EOS, stop_token_ids or stop string before this
  std::optional<int64_t> logprobs;         // ≥ 0: return the sampled token's and this many top logprobs
  std::optional<int64_t> prompt_logprobs;  // ≥ 0: the same for every prompt token after the first
  bool skip_special_tokens = true;         // in the detokenized text
  RequestOutputKind output_kind = RequestOutputKind::kFinalOnly;
  // Added to a token's logit before the penalties (OpenAI's logit_bias: token id → a finite bias;
  // the server clamps it to [-100, 100] as vLLM does, where -100 in effect bans the token).
  std::map<int32_t, float> logit_bias;
  // Set: every other token's logit is −inf (vLLM's allowed_token_ids; not empty).
  std::optional<std::vector<int32_t>> allowed_token_ids;
  // Words the output must not contain (vLLM's bad_words): each is tokenized as written and with a
  // leading space, and the last token of a tokenization is banned wherever the output so far ends
  // with the tokens before it. The front door fills bad_words_token_ids from them (the caller may
  // also give token sequences there directly, e.g. without a tokenizer).
  std::vector<std::string> bad_words;
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  // Set: the logprobs reported beside each sampled token are these ids' (in this order, with their
  // ranks) instead of the top `logprobs` (vLLM's logprob_token_ids); at most max_logprobs ids.
  std::optional<std::vector<int32_t>> logprob_token_ids;
  // Set: only the last k prompt tokens are kept (vLLM's truncate_prompt_tokens; -1: the last
  // max_model_len tokens). Applied by the front door before any other check on the prompt.
  std::optional<int64_t> truncate_prompt_tokens;
  // Which end truncate_prompt_tokens cuts (vLLM's truncation_side): "left" (the default) keeps
  // the last k tokens, "right" the first k.
  std::string truncation_side = "left";
  // Set: the prefix cache is salted with it (vLLM's cache_salt, a non-empty string): this
  // request's prompt shares cached blocks only with requests that give the same salt, so that one
  // client cannot learn from cache hits what another has sent. The answer's bits never depend on
  // it (a hit or a miss gives the same bits). vLLM carries it on the prompt; here it travels with
  // the request's parameters.
  std::optional<std::string> cache_salt;
  // Set: the output is constrained (StructuredOutputsParams above; vLLM's structured_outputs, and
  // its older name guided_decoding). The mask it gives a token is a function of the constraint and
  // this choice's own output so far, applied before logit_bias, the penalties and the temperature.
  std::optional<StructuredOutputsParams> structured_outputs;

  // Throws Error(kInvalidArgument) whose param() is the first field out of range and whose message
  // says the rule, e.g. "top_p must be in (0, 1], got 1.5". vocab_size bounds stop_token_ids;
  // logprobs and prompt_logprobs are bounded by min(vocab_size, max_logprobs) (vLLM's
  // max_logprobs, an engine argument).
  // logit_bias, allowed_token_ids and bad_words_token_ids are checked against vocab_size too.
  void validate(int64_t vocab_size, int64_t max_logprobs = INT64_MAX) const;

  bool greedy() const { return temperature == 0.0f; }
  bool top_k_enabled() const { return top_k > 0; }
};

// The seed of the k-th request (k from 0, in the order given) that gave none, in an offline front
// end seeded with `seed` (Python's LLM(seed=0), `ditto generate --prompts --seed 0`): the top 53
// bits of SplitMix64 of seed + k (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", 2014; the addition wraps mod 2^64) — 53 bits so that the seed reported in any JSON
// output reads back exactly (JavaScript, jq) and repeats the answer on every front end — so a
// script or a file of requests gives the same text on every run.
// The server draws an unseeded request's seed from the operating system instead (its requests'
// order depends on its clients) and returns it in the response's `seed`.
uint64_t derived_seed(uint64_t seed, uint64_t k);

// How a request's max_tokens is settled against the context (max_model_len).
enum class MaxTokensRule {
  kAsGiven,        // the caller asked for it: prompt + max_tokens must fit, else an error (OpenAI's rule)
  kClipToContext,  // a default, or the offline API: cut to what the context leaves (vLLM's offline rule)
  kRestOfContext,  // none given for a chat: whatever the context and the KV cache leave (at most
                   // generation_config's max_new_tokens)
};

// A model's default sampling parameters: the keys of its generation_config.json that vLLM's
// generation_config="auto" reads (temperature, top_p, top_k, min_p, repetition_penalty,
// max_new_tokens). The front door applies them to every request before the request's own values,
// whatever the front end. Unset: the key is absent (or EngineArgs::generation_config is "vllm").
struct GenerationDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int64_t> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int64_t> max_new_tokens;  // the default max_tokens; also caps a chat's default
  std::string source;                     // the file they came from; "" for none

  // `p` with every key present set (max_new_tokens as max_tokens).
  void apply(SamplingParams& p) const;
  // "temperature=0.6, top_p=0.95, top_k=20" (the keys present, SamplingParams' names); "" for none.
  std::string describe() const;
};

}  // namespace ditto
