// Turns one row of logits into the next token of one choice of one request, as a pure function of
// (logits, parameters, the tokens so far, seed, choice index i, output position t): no state is
// carried between calls, so the token never depends on batch, order or timing.
//
// Order of operations (vLLM's, vllm/v1/sample/sampler.py):
//   1. raw_logprobs: the canonical log_softmax of the raw logits; raw_logits: the logits as they
//      are — what `logprobs` reports in the raw modes;
//   2. masks to −inf: every token the structured-output constraint does not allow; every token
//      outside allowed_token_ids; the last token of each bad word whose
//      other tokens end the output so far; before min_tokens outputs, EOS (unless ignore_eos) and
//      stop_token_ids;
//   3. logit_bias added, in ascending token id order;
//   4. penalties: repetition (prompt and output tokens: logit/r if logit > 0 else logit·r), then
//      frequency (− f·count in the output), then presence (− p if in the output);
//   5. temperature 0: argmax, ties to the lowest id. Otherwise logits / temperature, canonical
//      softmax, then min_p (keep p ≥ min_p·p_max), top_k, top_p over the candidates sorted by
//      (probability desc, token id asc), and an inverse-CDF draw with u ∈ [0, 1) from
//      Philox4x32-10(counter = (t, i, tag), key = seed) — over that sorted order when a filter is
//      on, over ascending token ids otherwise; the cumulative sum is a sequential double sum.
//   6. processed_logits: the logits after 2–4 and, when not greedy, divided by the temperature,
//      with the tokens min_p, top_k and top_p dropped at −inf; processed_logprobs: their canonical
//      log_softmax — what `logprobs` reports in the processed modes (docs/NUMERICS.md).
// Thread-safety: a Sampler holds scratch buffers; use one per thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ditto/engine_args.h"
#include "ditto/request_output.h"
#include "ditto/sampling_params.h"

namespace ditto {

struct SamplerInput {
  std::span<const float> logits;              // [vocab_size] f32, the model's raw logits
  std::span<const int32_t> prompt_token_ids;  // for the repetition penalty
  std::span<const int32_t> output_token_ids;  // this choice's tokens so far; t = its size
  std::span<const int32_t> eos_token_ids;     // masked before min_tokens unless ignore_eos
  uint64_t seed = 0;
  int64_t choice = 0;                                       // i in [0, n)
  LogprobsMode logprobs_mode = LogprobsMode::kRawLogprobs;  // what the returned logprobs are
  // Structured outputs: the tokens the choice's constraint allows next (GrammarMatcher::fill_mask's
  // bits, ceil(vocab_size / 32) words); empty: no constraint.
  std::span<const uint32_t> grammar_mask;
};

// The uniform number in [0, 1) for (seed, choice, t): 53 bits of Philox4x32-10.
double sampling_uniform(uint64_t seed, int64_t choice, int64_t t);

class Sampler {
 public:
  // The token drawn, its entry in in.logprobs_mode's row, and the top `params.logprobs` entries.
  // Throws Error(kInvalidArgument) if logits is empty. Params must be validated beforehand.
  SampledToken sample(const SamplerInput& in, const SamplingParams& params);

  // The entry of `token_id` as sample() would have reported it had it drawn that token (the same
  // row, in in.logprobs_mode), and the top `top_n` entries: re-scoring an output as it was sampled.
  // Throws Error(kInvalidArgument) for an empty row or a token outside it.
  SampledToken score_as_sampled(const SamplerInput& in, const SamplingParams& params, int32_t token_id, int64_t top_n);

  // The raw entry of `token_id` under `logits` (a log-probability, or the logit under kRawLogits),
  // and the top `top_n` entries (prompt_logprobs, and re-scoring). Throws Error(kInvalidArgument)
  // for a token outside the row.
  SampledToken score(std::span<const float> logits, int32_t token_id, int64_t top_n,
                     LogprobsMode mode = LogprobsMode::kRawLogprobs);

 private:
  void raw_logprobs(std::span<const float> logits);
  // Steps 2–6 for one row: returns the token drawn and leaves in.logprobs_mode's row in logprobs_.
  int32_t run(const SamplerInput& in, const SamplingParams& params);
  TokenLogprob entry(int32_t token_id) const;
  std::vector<TokenLogprob> top(int64_t n);

  std::vector<float> logprobs_;  // [vocab] raw log-probabilities of the current row
  std::vector<float> work_;      // [vocab] processed logits, then probabilities
  std::vector<float> scaled_;    // [vocab] processed logits divided by the temperature
  std::vector<int32_t> ids_;     // candidate ids
  std::vector<uint8_t> keep_;    // [vocab] scratch: allowed tokens, then the filters' survivors
};

}  // namespace ditto
