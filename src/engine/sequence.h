// One choice of one request as the scheduler and the engine see it: its token ids (prompt, then
// output), how many of them have K/V in the cache, and where it is in its life.
#pragma once

#include <cstdint>
#include <vector>

namespace ditto {

// kError: the request cannot go on (a structured output whose constraint allows no token that the
// other masks leave: finish_reason "error", vLLM's FinishReason.ERROR).
enum class FinishReason { kNone, kStop, kLength, kAbort, kError };

struct Sequence {
  int64_t id = 0;                  // engine-unique; the KV cache manager's RequestId
  int64_t request = 0;             // index of its request in the engine
  int64_t choice = 0;              // i in [0, n)
  int64_t arrival = 0;             // FCFS order: requests first, then choice index
  std::vector<int32_t> token_ids;  // [num_prompt_tokens + outputs]
  int64_t num_prompt_tokens = 0;
  int64_t num_computed_tokens = 0;  // leading token_ids whose K/V is in the cache
  bool use_prefix_cache = true;     // false when prompt logprobs are wanted (every row computed)
  uint64_t prefix_root = 0;  // the prefix cache's root for it (KvCacheManager::salt_root; 0: unsalted), under the
                             // loaded weights (the scheduler keys it by epoch: epoch_root)
  int64_t num_preemptions = 0;
  int64_t num_cached_tokens = -1;  // prompt tokens the prefix cache held when first scheduled (-1: not yet)
  // Speculative decoding: tokens guessed to follow token_ids, verified in the next step that
  // schedules this sequence (then cleared), how many to guess next, and the back-off that pauses
  // guessing after guesses that all failed (engine.cc, Engine::propose and Engine::verify).
  std::vector<int32_t> proposal;
  int64_t speculation_tokens = 0;    // guesses to ask for next (0: not yet set: num_speculative_tokens)
  int64_t speculation_failures = 0;  // consecutive verifications that accepted nothing
  int64_t speculation_guessed = 0;   // guesses verified so far, and of those kept
  int64_t speculation_kept = 0;
  int64_t speculation_paused = 0;  // decode steps left without guessing
  FinishReason finish = FinishReason::kNone;

  int64_t num_output_tokens() const { return static_cast<int64_t>(token_ids.size()) - num_prompt_tokens; }
  int64_t num_uncomputed_tokens() const { return static_cast<int64_t>(token_ids.size()) - num_computed_tokens; }
  bool finished() const { return finish != FinishReason::kNone; }
};

}  // namespace ditto
