// ditto's offline API, shaped like vLLM's (`LLM(model=...).generate(prompts, sampling_params)`):
//
//   ditto::LLM llm({.model = "Qwen/Qwen3-8B"});
//   ditto::SamplingParams p;
//   p.temperature = 0.7f; p.max_tokens = 100; p.seed = 42;
//   for (const ditto::RequestOutput& out : llm.generate({"The future of AI is"}, p))
//     std::cout << out.outputs[0].text << "\n";
//
// Every output is the same bits whatever else is in the batch (docs/INVARIANCE.md).
// Thread-safety: an LLM is used from one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_output.h"
#include "engine/sampling_params.h"

namespace ditto {

class CausalLM;
class ChatTemplate;
class Engine;
class ThreadPool;
class Tokenizer;

struct LLMOptions {
  std::string model;                          // a directory or a hub id in the local HF cache
  int threads = 0;                            // 0: $DITTO_NUM_THREADS or all cores
  int64_t block_size = 16;                    // KV cache block, tokens
  int64_t kv_cache_memory = int64_t{2} << 30;  // bytes of bf16 KV cache
  int64_t max_num_batched_tokens = 2048;      // tokens per engine step
  int64_t max_num_seqs = 256;                 // sequences running at once
  bool enable_prefix_caching = true;
};

// One prompt: exactly one of text, token ids, or chat messages (rendered with the model's chat
// template, with add_generation_prompt; chat_template_kwargs such as enable_thinking).
struct PromptInput {
  std::optional<std::string> text{};
  std::optional<std::vector<int32_t>> token_ids{};
  std::optional<nlohmann::ordered_json> messages{};
  nlohmann::ordered_json tools = nullptr;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
};

// A request that could not run carries its error; the others of the batch complete.
struct GenerateResult {
  RequestOutput output;
  std::optional<std::string> error;
};

class LLM {
 public:
  // Loads the model, tokenizer and chat template. Throws Error naming the file/field at fault.
  explicit LLM(const LLMOptions& options);
  ~LLM();
  LLM(const LLM&) = delete;
  LLM& operator=(const LLM&) = delete;

  // Runs every prompt with its parameters (params.size() == 1: shared) and returns the results
  // in input order, request ids "0", "1", .... A bad prompt or parameter becomes that result's
  // error; the rest still run. `progress` prints a progress bar to stderr (when it is a terminal).
  // `on_result`, if set, is called with each result (index, result) as soon as it is final — a
  // refused request right away, the others as they finish, so not in input order; the returned
  // vector still holds every result in input order.
  using ResultFn = std::function<void(size_t index, const GenerateResult& result)>;
  std::vector<GenerateResult> generate(const std::vector<PromptInput>& prompts,
                                       const std::vector<SamplingParams>& params, bool progress = false,
                                       const ResultFn& on_result = nullptr);

  // Text prompts, one shared SamplingParams. Throws Error for the first bad request.
  std::vector<RequestOutput> generate(const std::vector<std::string>& prompts, const SamplingParams& params);

  // Engine limits for later generate() calls (block_size, kv_cache_memory, max_num_batched_tokens,
  // max_num_seqs, enable_prefix_caching); model and threads stay as loaded.
  void set_engine_options(const LLMOptions& options);

  // What the last generate() call's engine did.
  struct Stats {
    int64_t steps = 0;
    int64_t preemptions = 0;
    int64_t prefix_query_tokens = 0;
    int64_t prefix_hit_tokens = 0;
  };
  const Stats& last_stats() const { return stats_; }

  // Test double for the invariance harness's negative control: called on every logits row before
  // sampling with the number of sequences in that engine step. Null (the default) in real use.
  using LogitsHook = std::function<void(float* logits, int64_t vocab_size, int64_t batch_sequences)>;
  void set_logits_hook(LogitsHook hook) { logits_hook_ = std::move(hook); }

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const CausalLM& model() const { return *model_; }
  // The prompt's token ids: text with the tokenizer's special tokens, messages rendered with the
  // chat template (add_generation_prompt) then encoded without them, ids as given. Throws
  // Error(kInvalidArgument) for zero or several kinds, a model without a chat template, a
  // template error. Thread-safe.
  std::vector<int32_t> encode(const PromptInput& p) const;
  // Renders chat messages with the model's chat template (kwargs such as enable_thinking,
  // add_generation_prompt). Throws as encode(). Thread-safe.
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                          bool add_generation_prompt, const nlohmann::ordered_json& chat_template_kwargs) const;
  const LLMOptions& options() const { return options_; }
  // generation_config.json's and tokenizer_config.json's EOS ids.
  const std::vector<int32_t>& eos_token_ids() const { return eos_token_ids_; }
  // A long-lived engine over this model with the current engine options (a server's). Throws
  // Error(kInvalidArgument) when kv_cache_memory holds no block.
  std::unique_ptr<Engine> make_engine() const;
  // Tokens the engine's KV cache holds (kv_cache_memory in blocks × block_size).
  int64_t kv_cache_tokens() const;

 private:

  LLMOptions options_;
  std::string model_dir_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CausalLM> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;  // null when the model has none
  std::vector<int32_t> eos_token_ids_;
  Stats stats_;
  LogitsHook logits_hook_;
};

}  // namespace ditto
