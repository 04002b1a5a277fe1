#include "ditto/llm.h"

#include <unistd.h>

#include <algorithm>
#include <new>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/memory_info.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/causal_lm.h"
#include "model/generation_config.h"
#include "model/hub.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ditto {

LLM::LLM(const LLMOptions& options) : options_(options) {
  model_dir_ = resolve_model_path(options.model);
  pool_ = std::make_unique<ThreadPool>(options.threads > 0 ? options.threads : default_num_threads());
  model_ = CausalLM::load(model_dir_, pool_.get());
  // The KV cache is allocated when an engine starts; say now if it cannot fit.
  if (const std::optional<int64_t> available = mem_available_bytes(); available && options.kv_cache_memory > *available)
    throw Error(ErrorCode::kResourceExhausted,
                "kv_cache_memory (--kv-cache-memory) is " + format_gib(options.kv_cache_memory) + " but only " +
                    format_gib(*available) + " is available after loading the model (MemAvailable, /proc/meminfo)");
  tokenizer_ = Tokenizer::load(model_dir_);
  try {
    chat_template_ = std::make_unique<ChatTemplate>(ChatTemplate::load(model_dir_));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotFound) throw;
  }
  for (int64_t id : ditto::eos_token_ids(model_dir_, model_->config())) eos_token_ids_.push_back(static_cast<int32_t>(id));
  for (int32_t id : tokenizer_->eos_token_ids())
    if (std::find(eos_token_ids_.begin(), eos_token_ids_.end(), id) == eos_token_ids_.end()) eos_token_ids_.push_back(id);
}

LLM::~LLM() = default;

void LLM::set_engine_options(const LLMOptions& options) {
  options_.block_size = options.block_size;
  options_.kv_cache_memory = options.kv_cache_memory;
  options_.max_num_batched_tokens = options.max_num_batched_tokens;
  options_.max_num_seqs = options.max_num_seqs;
  options_.enable_prefix_caching = options.enable_prefix_caching;
}

std::vector<int32_t> LLM::encode(const PromptInput& p) const {
  const int kinds = p.text.has_value() + p.token_ids.has_value() + p.messages.has_value();
  if (kinds != 1) throw_invalid_argument("give exactly one of prompt (text), prompt_token_ids or messages");
  if (p.token_ids) return *p.token_ids;
  if (p.text) return tokenizer_->encode(*p.text, /*add_special_tokens=*/true);
  const std::string text = render_chat(*p.messages, p.tools, /*add_generation_prompt=*/true, p.chat_template_kwargs);
  return tokenizer_->encode(text, /*add_special_tokens=*/false);
}

std::string LLM::render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             bool add_generation_prompt, const nlohmann::ordered_json& chat_template_kwargs) const {
  if (chat_template_ == nullptr) throw_invalid_argument("messages: the model has no chat template");
  if (!chat_template_kwargs.is_object()) throw_invalid_argument("chat_template_kwargs must be a JSON object");
  return chat_template_->render(messages, tools, add_generation_prompt, chat_template_kwargs);
}

int64_t LLM::kv_cache_tokens() const {
  return kv_blocks_for_memory(model_->config(), options_.block_size, options_.kv_cache_memory) * options_.block_size;
}

std::unique_ptr<Engine> LLM::make_engine() const {
  EngineConfig config;
  config.block_size = options_.block_size;
  config.num_kv_blocks = kv_blocks_for_memory(model_->config(), options_.block_size, options_.kv_cache_memory);
  if (config.num_kv_blocks < 1)
    throw_invalid_argument("kv_cache_memory " + std::to_string(options_.kv_cache_memory) +
                           " bytes holds no KV block of this model");
  config.enable_prefix_caching = options_.enable_prefix_caching;
  config.scheduler.max_num_batched_tokens = options_.max_num_batched_tokens;
  config.scheduler.max_num_seqs = options_.max_num_seqs;
  config.logits_hook = logits_hook_;
  return std::make_unique<Engine>(*model_, tokenizer_.get(), eos_token_ids_, config);
}

std::vector<GenerateResult> LLM::generate(const std::vector<PromptInput>& prompts,
                                          const std::vector<SamplingParams>& params, bool progress,
                                          const ResultFn& on_result) {
  if (params.size() != 1 && params.size() != prompts.size())
    throw_invalid_argument("generate: " + std::to_string(params.size()) + " SamplingParams for " +
                           std::to_string(prompts.size()) + " prompts (give one, or one per prompt)");
  const std::unique_ptr<Engine> engine_owner = make_engine();
  Engine& engine = *engine_owner;

  std::vector<GenerateResult> results(prompts.size());
  size_t accepted = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = std::to_string(i);
    results[i].output.request_id = id;
    try {
      std::vector<int32_t> ids = encode(prompts[i]);
      results[i].output.prompt_token_ids = ids;
      engine.add_request(id, std::move(ids), params.size() == 1 ? params[0] : params[i],
                         prompts[i].text.value_or(""));
      ++accepted;
    } catch (const Error& e) {
      results[i].error = std::string("prompt ") + id + ": " + e.what();
    } catch (const std::bad_alloc&) {
      results[i].error = std::string("prompt ") + id + ": out of memory while queueing it";
    }
    if (results[i].error && on_result) on_result(i, results[i]);
  }
  const bool bar = progress && isatty(STDERR_FILENO);
  size_t done = 0;
  while (engine.has_unfinished()) {
    for (RequestOutput& out : engine.step()) {
      const size_t i = std::stoul(out.request_id);
      results[i].output = std::move(out);
      ++done;
      if (on_result) on_result(i, results[i]);
    }
    if (bar) std::fprintf(stderr, "\rgenerating: %zu/%zu requests done", done, accepted);
  }
  if (bar) std::fprintf(stderr, "\n");
  stats_.steps = engine.num_steps();
  stats_.preemptions = engine.scheduler().num_preemptions();
  stats_.prefix_query_tokens = engine.kv_cache().stats().prefix_queries_tokens;
  stats_.prefix_hit_tokens = engine.kv_cache().stats().prefix_hit_tokens;
  return results;
}

std::vector<RequestOutput> LLM::generate(const std::vector<std::string>& prompts, const SamplingParams& params) {
  std::vector<PromptInput> inputs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) inputs[i].text = prompts[i];
  std::vector<RequestOutput> out;
  for (GenerateResult& r : generate(inputs, {params})) {
    if (r.error) throw_invalid_argument(*r.error);
    out.push_back(std::move(r.output));
  }
  return out;
}

}  // namespace ditto
