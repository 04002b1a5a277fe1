// The beam search loop (vLLM's, over any engine): each step asks for the next-token logprobs of
// every live beam of every prompt at once, extends each beam by each of its candidates, and keeps
// the beam_width best of each prompt by length-penalised score. Deterministic: candidates come in
// the engine's order (the beam's own token first, then its top logprobs by rank), beams are kept
// with a stable sort, so equal scores keep that order, and every number is the engine's, whose
// rows never depend on the batch — so a prompt's beams are the same bits alone or beside others.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ditto/beam_search.h"

namespace ditto {

// One step's request for a beam: its tokens so far, and the seed of its sampled candidate (used
// when temperature > 0).
struct BeamStepRequest {
  const std::vector<int32_t>* tokens = nullptr;
  uint64_t seed = 0;
};

// Runs one engine step for every beam: for each request, the next token's entry and its
// top 2·beam_width logprobs, or nullopt when the beam cannot grow (its context is full).
using BeamStepFn = std::function<std::vector<std::optional<SampledToken>>(const std::vector<BeamStepRequest>&)>;

// Beam search over `prompts` (token ids). `eos_token_ids` end a beam unless params.ignore_eos;
// `seed` keys the sampled candidates: step t's beam b draws with derived_seed(seed, t·W + b).
// Returns one output per prompt with at most beam_width sequences, best first; texts are left
// empty (the caller decodes). Params must be validated.
std::vector<BeamSearchOutput> run_beam_search(const std::vector<std::vector<int32_t>>& prompts,
                                              const BeamSearchParams& params, const std::vector<int32_t>& eos_token_ids,
                                              uint64_t seed, const BeamStepFn& step);

class LLMEngine;

// run_beam_search over `engine`: each step's beams are one-token requests to engine.generate
// (EOS not ending them, 2·beam_width raw logprobs, the step's derived seed), a beam whose tokens
// fill the context ends there; `logits_hook` is passed on (check-invariance's negative control).
// Texts are left empty. Throws Error(kInvalidArgument) for a request the engine refuses.
std::vector<BeamSearchOutput> beam_search_on(
    LLMEngine& engine, const std::vector<std::vector<int32_t>>& prompts, const BeamSearchParams& params, uint64_t seed,
    const std::function<void(float*, int64_t, int64_t)>& logits_hook = nullptr);

}  // namespace ditto
