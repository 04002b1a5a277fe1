// Beam search with vLLM's semantics (vllm/entrypoints/llm.py LLM.beam_search, vllm/beam_search.py):
// its parameters, its candidates, its length-penalised score and its outputs. Part of ditto's
// public C++ API (self-contained: the standard library and ditto's own public headers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ditto/request_output.h"

namespace ditto {

// vLLM's BeamSearchParams.
struct BeamSearchParams {
  int64_t beam_width = 1;                   // beams kept per prompt, in [1, max_logprobs / 2]
  int64_t max_tokens = 16;                  // steps, ≥ 1
  bool ignore_eos = false;                  // an EOS token ends a beam (false) or is an ordinary token
  float temperature = 0.0f;                 // ≥ 0: > 0 adds each beam's sampled token to its candidates
  float length_penalty = 1.0f;              // score = cumulative logprob / (sequence length ^ length_penalty)
  bool include_stop_str_in_output = false;  // the server's: the EOS text kept in `text`

  // Throws Error(kInvalidArgument, param = the field) naming the rule; beam_width is bounded by
  // max_logprobs / 2 (each step asks for 2·beam_width logprobs, as vLLM does).
  void validate(int64_t max_logprobs) const;
};

// One finished beam (vLLM's BeamSearchSequence).
struct BeamSearchSequence {
  std::vector<int32_t> tokens;  // the prompt's tokens, then the beam's
  int64_t num_prompt_tokens = 0;
  // Per output token: its entry (token) and the step's candidates (top_logprobs), as the engine
  // reported them (raw log-probabilities).
  std::vector<SampledToken> logprobs;
  double cum_logprob = 0.0;   // the beam's logprobs summed in double, in order
  double score = 0.0;         // cum_logprob / (tokens.size() − [ends in EOS]) ^ length_penalty
  std::string text;           // the whole sequence decoded (prompt included, as vLLM's LLM gives it)
  std::string finish_reason;  // "stop" (ended in EOS) or "length"
};

// The best beams of one prompt, best first (vLLM's BeamSearchOutput): at most beam_width.
struct BeamSearchOutput {
  std::vector<BeamSearchSequence> sequences;
};

}  // namespace ditto
