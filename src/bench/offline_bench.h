// `ditto bench --scenario offline` measured: many requests through the batching engine, all
// submitted at once, against batch-1 decode of the same model measured in the same run.
//
// Method: num_requests random prompts of prompt_tokens tokens each (random_prompt, one draw of
// num_requests × prompt_tokens ids from `seed`, cut in turn), each generating output_tokens
// tokens (temperature 0.8, request r seeded r, ignore_eos). The clock runs from the first
// submission to the step that finishes the last request. Batch-1 decode is one timed run of
// output_tokens greedy steps from an empty context (ModelSpeedBench, after its warm-up run).
// Thread-safety: uses the model's thread pool; not concurrently with other work on that model.
#pragma once

#include <cstdint>

#include "ditto/engine_args.h"

namespace ditto {

class CausalLM;

// The batch; `ditto bench`'s --num-requests, --prompt-tokens, --output-tokens, --seed.
struct OfflineBenchOptions {
  int64_t num_requests = 64;
  int64_t prompt_tokens = 256;  // per request
  int64_t output_tokens = 128;  // per request
  uint64_t seed = 0;            // of the random prompts
};

// What measure_offline_throughput measured.
struct OfflineBenchResult {
  double seconds = 0;                        // wall time of the batch, submission to last step
  int64_t engine_steps = 0;                  // Engine::step calls the batch took
  int64_t preemptions = 0;                   // the scheduler's, for want of KV cache blocks
  int64_t long_prefill_token_threshold = 0;  // the scheduler's, after its default
  int64_t generated_tokens = 0;              // over every request (num_requests × output_tokens)
  double generated_tokens_per_s = 0;         // generated_tokens ÷ seconds
  double batch1_decode_tokens_per_s = 0;     // output_tokens ÷ the batch-1 decode run's seconds
};

// Throws Error(kInvalidArgument), naming `ditto bench`'s flags, if a count in `options` is under
// 1. measure_offline_throughput calls it; a caller may call it first to refuse before a slow load.
void check_offline_options(const OfflineBenchOptions& options);

// Measures `model` (its engine from args: block_size, kv_cache_memory in bytes,
// max_num_batched_tokens, long_prefill_token_threshold). Throws as check_offline_options;
// Error(kInvalidArgument) as ModelSpeedBench's constructor for output_tokens the model's context
// cannot hold; and what Engine's constructor and add_request throw (e.g. a KV cache of no blocks).
OfflineBenchResult measure_offline_throughput(const CausalLM& model, const EngineArgs& args,
                                              const OfflineBenchOptions& options);

}  // namespace ditto
