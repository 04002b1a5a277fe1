// Prefill and decode speed of a model at batch size 1, through the engine as `ditto generate`
// drives it: a seeded random prompt prefilled in steps of at most kPrefillStepTokens tokens
// (chunked prefill), then greedy decode steps of one token each; scheduling, the paged KV cache and
// sampling included.
// Thread-safety: uses the model's thread pool; not concurrently with other work on that model.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "bench/timing.h"
#include "core/step_profile.h"
#include "engine/engine.h"
#include "model/causal_lm.h"

namespace ditto {

// The most tokens one prefill step runs (as `ditto generate` does).
inline constexpr int64_t kPrefillStepTokens = 512;

struct ModelSpeedOptions {
  int64_t prompt_tokens = 512;
  int64_t decode_tokens = 128;  // 0: prefill only
  uint64_t seed = 0;            // of the random prompt
  int64_t block_size = 16;      // KV cache block, tokens
  // Where decode starts: false (default) from an empty context, the first prompt token at position
  // 0, as llama-bench's tg test does; true right after the prompt (positions prompt_tokens…),
  // which adds the attention over the prompt to every step.
  bool decode_after_prompt = false;
  // Applied to each phase separately. The prefill warm-up is a full prefill (it also fills the KV
  // cache the decode runs read); the decode warm-up is a full run of decode_tokens steps.
  RepeatPolicy repeat{.warmups = 1, .repetitions = 3, .budget_seconds = 20};
};

// Where one timed run's wall time went (core/step_profile.h): per phase, summed over its steps.
struct StepBudget {
  double run_seconds = 0;  // the run's wall time; what the phases leave is the bench loop's own
  int64_t steps = 0;       // engine steps in the run
  std::array<double, static_cast<size_t>(StepPhase::kCount)> seconds{};
  std::array<int64_t, static_cast<size_t>(StepPhase::kCount)> calls{};
};

// `num_tokens` token ids uniform in [0, vocab_size), a pure function of (seed, index): Philox4x32-10
// keyed by the seed, one 32-bit word per token reduced modulo vocab_size.
std::vector<int32_t> random_prompt(int64_t num_tokens, int64_t vocab_size, uint64_t seed);

// Times the two phases separately, so a caller can measure the machine limit each is judged by
// right before it. Each run is one request: a timed prefill is the prompt with max_tokens 1 (no
// prefix caching, so every run computes the whole prompt); a timed decode is the decode_tokens
// steps of a request whose prompt is the first prompt token (or, with decode_after_prompt, the
// whole prompt, prefilled untimed before the run). The model is deterministic, so repetitions
// measure identical work.
class ModelSpeedBench {
 public:
  // Makes the engines (KV caches for the prompt and for the decode run). Throws
  // Error(kInvalidArgument) if prompt_tokens is under 1, decode_tokens negative, or together they exceed
  // the model's max_position_embeddings.
  ModelSpeedBench(const CausalLM& model, const ModelSpeedOptions& options);

  // One prefill of prompt_tokens tokens. Tokens/s = prompt_tokens ÷ seconds. before_each: as in
  // time_runs (e.g. one pass of the limit the phase is judged by).
  RunTimes time_prefill(const std::function<void()>& before_each = nullptr);
  // decode_tokens greedy steps at batch 1, from position 0 or after the prompt
  // (decode_after_prompt). Tokens/s = decode_tokens ÷ seconds.
  RunTimes time_decode(const std::function<void()>& before_each = nullptr);
  // The step budget of time_decode's fastest run (every run is profiled; the profile's timers
  // cost about 300 clock reads per step of a 28-layer model).
  const StepBudget& decode_budget() const { return decode_budget_; }

 private:
  // Steps `engine` until it has nothing left, or (stop_after_first_token) until its request has
  // sampled its first token.
  static int64_t run(Engine& engine, bool stop_after_first_token = false);

  ModelSpeedOptions options_;
  std::vector<int32_t> prompt_;  // [prompt_tokens]
  std::unique_ptr<Engine> prefill_engine_;
  std::unique_ptr<Engine> decode_engine_;
  int64_t next_request_ = 0;
  StepBudget decode_budget_;
};

}  // namespace ditto
