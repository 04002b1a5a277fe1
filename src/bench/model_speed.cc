#include "bench/model_speed.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>

#include "core/error.h"
#include "core/philox.h"
#include "kernels/softmax.h"

namespace ditto {
namespace {

int64_t num_blocks_for(const ModelSpeedOptions& o) {
  return (o.prompt_tokens + o.decode_tokens + o.block_size - 1) / o.block_size;
}

const ModelSpeedOptions& checked(const ModelSpeedOptions& o, const ModelConfig& config) {
  if (o.prompt_tokens < 1) throw_invalid_argument("--prompt-tokens must be at least 1");
  if (o.decode_tokens < 1) throw_invalid_argument("--decode-tokens must be at least 1");
  if (o.prompt_tokens + o.decode_tokens > config.max_position_embeddings)
    throw_invalid_argument("--prompt-tokens " + std::to_string(o.prompt_tokens) + " + --decode-tokens " +
                           std::to_string(o.decode_tokens) +
                           " exceed the model's context length "
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
    : model_(model),
      options_(checked(options, model.config())),
      prompt_(random_prompt(options.prompt_tokens, model.config().vocab_size, options.seed)),
      runner_(model, num_blocks_for(options), options.block_size) {
  BlockAllocator allocator(num_blocks_for(options));
  blocks_ = allocator.allocate_for_tokens(options.prompt_tokens + options.decode_tokens, options.block_size);
}

void ModelSpeedBench::prefill() {
  std::vector<float> logits;
  for (int64_t start = 0; start < options_.prompt_tokens; start += kPrefillStepTokens) {
    const int64_t n = std::min(kPrefillStepTokens, options_.prompt_tokens - start);
    const SequenceStep step{
        std::span<const int32_t>(prompt_).subspan(static_cast<size_t>(start), static_cast<size_t>(n)),
        static_cast<int32_t>(start), blocks_, false};
    logits = runner_.step(std::span<const SequenceStep>(&step, 1));
  }
  first_token_ = static_cast<int32_t>(argmax_row(logits.data(), model_.config().vocab_size));
}

void ModelSpeedBench::decode() {
  int32_t token = prompt_[0];
  int64_t start = 0;
  if (options_.decode_after_prompt) {
    DITTO_CHECK(first_token_ >= 0) << "time_decode() before time_prefill()";
    token = first_token_;
    start = options_.prompt_tokens;
  }
  for (int64_t t = 0; t < options_.decode_tokens; ++t) {
    const SequenceStep step{std::span<const int32_t>(&token, 1), static_cast<int32_t>(start + t), blocks_, false};
    const std::vector<float> logits = runner_.step(std::span<const SequenceStep>(&step, 1));
    token = static_cast<int32_t>(argmax_row(logits.data(), model_.config().vocab_size));
  }
}

RunTimes ModelSpeedBench::time_prefill(const std::function<void()>& before_each) {
  return time_runs([this] { prefill(); }, options_.repeat, before_each);
}

RunTimes ModelSpeedBench::time_decode(const std::function<void()>& before_each) {
  return time_runs([this] { decode(); }, options_.repeat, before_each);
}

}  // namespace ditto
