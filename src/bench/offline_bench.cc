#include "bench/offline_bench.h"

#include <chrono>
#include <string>
#include <vector>

#include "bench/model_speed.h"
#include "core/error.h"
#include "engine/engine.h"
#include "model/causal_lm.h"

namespace ditto {
namespace {

// Batch-1 decode of output_tokens steps, as the model scenario measures it, in tokens/s.
double batch1_decode_tokens_per_s(const CausalLM& model, const EngineArgs& args, int64_t output_tokens) {
  ModelSpeedOptions so;
  so.prompt_tokens = 1;
  so.decode_tokens = output_tokens;
  so.block_size = args.block_size;
  so.repeat.repetitions = 1;
  return output_tokens / ModelSpeedBench(model, so).time_decode().best_seconds;
}

EngineConfig engine_config(const CausalLM& model, const EngineArgs& args) {
  EngineConfig config;
  config.block_size = args.block_size;
  config.num_kv_blocks = kv_blocks_for_memory(model.config(), args.block_size, args.kv_cache_memory);
  config.scheduler.max_num_batched_tokens = args.max_num_batched_tokens;
  config.scheduler.long_prefill_token_threshold = args.long_prefill_token_threshold;
  return config;
}

}  // namespace

void check_offline_options(const OfflineBenchOptions& o) {
  if (o.num_requests < 1 || o.output_tokens < 1 || o.prompt_tokens < 1)
    throw_invalid_argument("--num-requests, --output-tokens and --prompt-tokens must be at least 1");
}

OfflineBenchResult measure_offline_throughput(const CausalLM& model, const EngineArgs& args,
                                              const OfflineBenchOptions& o) {
  check_offline_options(o);
  OfflineBenchResult result;
  result.batch1_decode_tokens_per_s = batch1_decode_tokens_per_s(model, args, o.output_tokens);
  Engine engine(model, nullptr, {}, engine_config(model, args));
  const std::vector<int32_t> prompt_ids =
      random_prompt(o.num_requests * o.prompt_tokens, model.config().vocab_size, o.seed);
  SamplingParams p;
  p.temperature = 0.8f;
  p.max_tokens = o.output_tokens;
  p.ignore_eos = true;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < o.num_requests; ++r) {
    p.seed = static_cast<uint64_t>(r);
    const auto first = prompt_ids.begin() + r * o.prompt_tokens;
    engine.add_request(std::to_string(r), std::vector<int32_t>(first, first + o.prompt_tokens), p);
  }
  while (engine.has_unfinished())
    for (const RequestOutput& out : engine.step())
      for (const CompletionOutput& c : out.outputs) result.generated_tokens += static_cast<int64_t>(c.token_ids.size());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.generated_tokens_per_s = result.generated_tokens / result.seconds;
  result.engine_steps = engine.num_steps();
  result.preemptions = engine.scheduler().num_preemptions();
  result.long_prefill_token_threshold = engine.scheduler().long_prefill_token_threshold();
  return result;
}

}  // namespace ditto
