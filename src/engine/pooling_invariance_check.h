// check-invariance's pooling rows (invariance_check.h): on a model that pools, every case's prompt
// as a pooling request — embeddings with the model's defaults, Matryoshka dimensions, without
// normalization, truncated; or a reranker's scores with and without the activation — run alone,
// then batched and shuffled, beside generation traffic in the same engine steps, at small step
// budgets, with prefix-cache hits, preempted, on another thread count and (with tensor
// parallelism) against one process, compared bit for bit (output_diff.h: RequestOutput::pooled).
// Thread-safety: none; one call at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "ditto/engine_args.h"
#include "ditto/prompt_input.h"
#include "engine/engine.h"
#include "engine/invariance_check.h"

namespace ditto {

class LLMEngine;

// `llm` is left with `base`'s engine arguments. `traffic`: generation requests to co-run (not
// compared). `fault`: the negative control's logits hook (a reranker's scores read logits), null
// in real use. Throws Error(kInvalidArgument) for a prompt the engine refuses when run alone.
std::vector<InvarianceRow> check_pooling_invariance(LLMEngine& llm, const EngineArgs& base,
                                                    const std::vector<PromptInput>& prompts,
                                                    const std::vector<PromptInput>& traffic_prompts,
                                                    const std::vector<SamplingParams>& traffic_params, uint64_t seed,
                                                    const EngineConfig::LogitsHook& fault = nullptr);

}  // namespace ditto
