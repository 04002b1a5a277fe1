#include "bench/model_speed.h"

#include <array>
#include <chrono>
#include <string>

#include "core/error.h"
#include "core/philox.h"

namespace ditto {
namespace {

// An engine of one sequence at a time whose KV cache holds `tokens` positions.
std::unique_ptr<Engine> engine_for(const CausalLM& model, const ModelSpeedOptions& o, int64_t tokens,
                                   bool enable_prefix_caching) {
  EngineConfig config;
  config.block_size = o.block_size;
  config.num_kv_blocks = (tokens + o.block_size - 1) / o.block_size;
  config.enable_prefix_caching = enable_prefix_caching;
  config.scheduler.max_num_seqs = 1;
  config.scheduler.max_num_batched_tokens = kPrefillStepTokens;
  return std::make_unique<Engine>(model, /*tokenizer=*/nullptr, /*eos_token_ids=*/std::vector<int32_t>{}, config);
}

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.output_kind = RequestOutputKind::kDelta;  // reports each token: run() can stop after the first
  return p;
}

const ModelSpeedOptions& checked(const ModelSpeedOptions& o, const ModelConfig& config) {
  if (o.prompt_tokens < 1) throw_invalid_argument("--prompt-tokens must be at least 1");
  // 0: the prompt alone (time_decode is then not to be called).
  if (o.decode_tokens < 0) throw_invalid_argument("--decode-tokens must not be negative");
  // The request that decodes after the prompt holds the prompt, the token sampled from it and
  // decode_tokens more.
  if (o.prompt_tokens + o.decode_tokens >= config.max_position_embeddings)
    throw_invalid_argument("--prompt-tokens " + std::to_string(o.prompt_tokens) + " + --decode-tokens " +
                           std::to_string(o.decode_tokens) +
                           " must stay below the model's context length "
                           "(max_position_embeddings = " +
                           std::to_string(config.max_position_embeddings) + ")");
  return o;
}

}  // namespace

std::vector<int32_t> random_prompt(int64_t num_tokens, int64_t vocab_size, uint64_t seed) {
  const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  std::vector<int32_t> ids(static_cast<size_t>(num_tokens));
  for (int64_t i = 0; i < num_tokens; ++i) {
    const auto bits = philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32), 0, 0}, key);
    ids[static_cast<size_t>(i)] = static_cast<int32_t>(bits[0] % static_cast<uint64_t>(vocab_size));
  }
  return ids;
}

ModelSpeedBench::ModelSpeedBench(const CausalLM& model, const ModelSpeedOptions& options)
    : options_(checked(options, model.config())),
      prompt_(random_prompt(options.prompt_tokens, model.config().vocab_size, options.seed)),
      // Prefill runs compute the whole prompt every time: no prefix cache. Decode after the prompt
      // reuses its cached blocks for the untimed prefill before each run.
      prefill_engine_(engine_for(model, options_, options_.prompt_tokens + 1, /*enable_prefix_caching=*/false)),
      decode_engine_(engine_for(
          model, options_, (options_.decode_after_prompt ? options_.prompt_tokens + 1 : 1) + options_.decode_tokens,
          /*enable_prefix_caching=*/options_.decode_after_prompt)) {}

int64_t ModelSpeedBench::run(Engine& engine, bool stop_after_first_token) {
  int64_t steps = 0;
  while (engine.has_unfinished()) {
    ++steps;
    for (const RequestOutput& r : engine.step())
      if (stop_after_first_token && !r.outputs.empty() && !r.outputs[0].token_ids.empty()) return steps;
  }
  return steps;
}

RunTimes ModelSpeedBench::time_prefill(const std::function<void()>& before_each) {
  auto add = [&] {
    if (before_each) before_each();
    prefill_engine_->add_request(std::to_string(next_request_++), prompt_, greedy(1));
  };
  return time_runs([this] { run(*prefill_engine_); }, options_.repeat, add);
}

RunTimes ModelSpeedBench::time_decode(const std::function<void()>& before_each) {
  // From an empty context: the first prompt token at position 0, then a token per step, as
  // llama-bench's tg test. After the prompt: the prompt's first sampled token is the first input.
  auto add = [&] {
    if (before_each) before_each();
    if (options_.decode_after_prompt) {
      decode_engine_->add_request(std::to_string(next_request_++), prompt_, greedy(options_.decode_tokens + 1));
      run(*decode_engine_, /*stop_after_first_token=*/true);
    } else {
      decode_engine_->add_request(std::to_string(next_request_++), {prompt_[0]}, greedy(options_.decode_tokens));
    }
  };
  decode_budget_ = StepBudget{};
  auto profiled_run = [this] {
    StepProfile profile;
    const StepProfile::Scope scope(&profile);
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t steps = run(*decode_engine_);
    const double seconds = seconds_since(t0);
    if (decode_budget_.steps == 0 || seconds < decode_budget_.run_seconds)
      decode_budget_ = StepBudget{seconds, steps, profile.seconds(), profile.calls()};
  };
  return time_runs(profiled_run, options_.repeat, add);
}

}  // namespace ditto
