// vLLM's SamplingParams fields read from a JSON request: one reader for the server's request
// bodies and the CLI's JSON-lines requests, so a field means the same thing in both.
#pragma once

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "ditto/error.h"
#include "ditto/sampling_params.h"

namespace ditto {

// Reads the SamplingParams fields present (and not null) in `body` into `params`: n, temperature,
// top_p, top_k, min_p, presence_penalty, frequency_penalty, repetition_penalty, seed, stop,
// stop_token_ids, ignore_eos, include_stop_str_in_output, skip_special_tokens, max_tokens,
// min_tokens, prompt_logprobs, logit_bias (each bias clamped to [-100, 100] as vLLM does),
// allowed_token_ids, bad_words, truncate_prompt_tokens, and structured outputs: vLLM's
// structured_outputs object or its older guided_json / guided_regex / guided_choice /
// guided_grammar / structural_tag / guided_whitespace_pattern / guided_decoding_backend (one way
// per request; a JSON Schema as an object or as text). Types are checked here ("field 'top_p' must be a number, got
// ..."); ranges are SamplingParams::validate's, applied at the front door. Throws
// Error(kInvalidArgument) whose param() is the field. Returns true when max_tokens was given.
bool read_sampling_params(const nlohmann::ordered_json& body, SamplingParams& params);

// The keys read_sampling_params reads.
const std::set<std::string>& sampling_params_keys();

// vLLM request fields that would change the result and that ditto does not implement (yet): beam
// search (use_beam_search, length_penalty), logits_processors, vllm_xargs, thinking_token_budget, prompt_embeds,
// mm_processor_kwargs, spaces_between_special_tokens. One present at other than its no-op value (use_beam_search false,
// length_penalty 1, spaces_between_special_tokens true, null for the rest) is refused: Error(kInvalidArgument, param =
// the field) naming it — never dropped. The server's bodies and `generate --prompts` lines share it. `honoured`: fields
// of the table the caller implements itself (the server's use_beam_search and length_penalty).
void refuse_unimplemented_fields(const nlohmann::ordered_json& body, const std::set<std::string>& honoured = {});

// The keys refuse_unimplemented_fields reads (so a front end does not call them unknown).
const std::set<std::string>& unimplemented_field_keys();

// Runs a strict field reader (core/json_input.h) and gives its Error the field's name as param.
template <typename F>
auto read_field(const std::string& name, F&& read) {
  try {
    return read();
  } catch (const Error& e) {
    if (!e.param().empty()) throw;
    throw Error(e.code(), e.what(), name);
  }
}

}  // namespace ditto
