// How to load a model and size its engine: vLLM's EngineArgs, with the names and defaults of
// `vllm serve` / `LLM(...)` where they exist, and ditto's own for what a CPU engine adds.
// Part of ditto's public C++ API (self-contained: the standard library only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ditto {

// Speculative decoding (vLLM's speculative_config, its key names): a proposer guesses the next
// tokens, the model verifies them in one forward pass by sampling its own token at each position
// exactly as plain decoding would, and keeps a guess only while it equals that token. Outputs are
// bit-identical with speculation on or off (docs/SPECULATIVE.md); only the speed changes.
struct SpeculativeConfig {
  // "" (off), "ngram" (prompt lookup: copies what followed the latest earlier occurrence of the
  // sequence's last tokens) or "draft_model" (a smaller model with the same vocabulary; implied by
  // `model`).
  std::string method;
  std::string model;                   // the draft model: a directory, GGUF file or hub id
  int64_t num_speculative_tokens = 0;  // k, the tokens proposed per step, in [1, 32] when on
  // ngram: the suffix lengths tried, longest first, in [1, prompt_lookup_max]. Unset (0) in the
  // JSON: both 5 when neither is given, else the one given (vLLM's defaults).
  int64_t prompt_lookup_min = 0;
  int64_t prompt_lookup_max = 0;
  // No proposals in a step that has at least this many running sequences (a full batch is
  // compute-bound, where verifying guesses costs more than it saves); 0: never off by batch size.
  int64_t disable_by_batch_size = 0;

  bool enabled() const { return !method.empty(); }
  bool operator==(const SpeculativeConfig&) const = default;
};

// What a request's logprobs report (vLLM's logprobs_mode; docs/NUMERICS.md gives each transform):
// the model's distribution as it came out of the forward pass, or the one the sampler drew from
// (after allowed_token_ids, bad_words, min_tokens, logit_bias, the penalties, temperature, min_p,
// top_k and top_p), as log-probabilities or as logits. prompt_logprobs are the raw modes' rows
// (a prompt token is not sampled): log-probabilities, or logits under kRawLogits.
enum class LogprobsMode { kRawLogprobs, kRawLogits, kProcessedLogprobs, kProcessedLogits };

// "raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits" (vLLM's names).
const char* logprobs_mode_name(LogprobsMode mode);
// The mode of that name. Throws Error(kInvalidArgument, param = "logprobs_mode") naming the four.
LogprobsMode parse_logprobs_mode(const std::string& name);

struct EngineArgs {
  std::string model;                           // a directory or a hub id in the local HF cache
  int threads = 0;                             // 0: $DITTO_NUM_THREADS or all cores
  int64_t block_size = 16;                     // KV cache block, tokens
  int64_t kv_cache_memory = int64_t{2} << 30;  // bytes of bf16 KV cache
  int64_t max_num_batched_tokens = 2048;       // tokens per engine step
  int64_t max_num_seqs = 256;                  // sequences running at once
  // The most prompt tokens one request prefills in an engine step it shares with others (vLLM's
  // long_prefill_token_threshold), so that no request waits behind a long prompt; ≥ 0. 0: a
  // quarter of max_num_batched_tokens; max_num_batched_tokens or more: no cap. Never changes a bit
  // of any output (chunking does not).
  int64_t long_prefill_token_threshold = 0;
  bool enable_prefix_caching = true;
  // Context in tokens (prompt + output) every request must fit; 0: the model's
  // max_position_embeddings. A smaller value caps a chat's default max_tokens.
  int64_t max_model_len = 0;
  int64_t max_logprobs = 20;                                // the most top logprobs a request may ask for
  LogprobsMode logprobs_mode = LogprobsMode::kRawLogprobs;  // what logprobs report (above)
  // Where requests' default sampling parameters come from (vLLM's --generation-config): "auto"
  // (the model's generation_config.json: temperature, top_p, top_k, min_p, repetition_penalty,
  // max_new_tokens), "vllm" (none: SamplingParams' own defaults), or a folder holding a
  // generation_config.json. A request's own values always win.
  std::string generation_config = "auto";
  // The chat template in place of the model's (vLLM's --chat-template): a Jinja file, or the
  // template text itself; "" for the model's own. The model's special tokens stay.
  std::string chat_template;
  // Processes the model is split over (vLLM's tensor_parallel_size), one per MPI rank, launched
  // with `mpirun -np N`; outputs are bit-identical for every N (docs/INVARIANCE.md). Each rank holds
  // 1/N of the weights and of kv_cache_memory's KV heads. Only rank 0 may construct an engine; the
  // others serve it (serve_as_tensor_parallel_rank, model/tensor_parallel_worker.h).
  int tensor_parallel_size = 1;
  // Off by default; parse_speculative_config (engine/speculative.h) reads vLLM's JSON form.
  SpeculativeConfig speculative_config;
  // Return, with every finished choice, the experts the routers chose for each of its tokens
  // (CompletionOutput::routed_experts; vLLM's enable_return_routed_experts). A model without MoE
  // layers is refused by name (Error(kInvalidArgument, param = "enable_return_routed_experts")).
  bool enable_return_routed_experts = false;
  // Pooling (embeddings and scores; include/ditto/pooling.h, docs/POOLING.md), vLLM's names:
  // runner "auto" (pooling when the checkpoint's files say so: sentence-transformers modules, a
  // GGUF pooling_type), "generate" or "pooling"; task "auto", "generate", "embed" or "score" (a
  // causal LM reranker's yes/no logits; implies runner pooling). Generation requests run on a
  // pooling model too: one engine serves both.
  std::string runner = "auto";
  std::string task = "auto";
  // vLLM's hf_overrides as JSON text, for the pooling keys only: {"architectures":
  // ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"],
  // "is_original_qwen3_reranker": true} makes a reranker; matryoshka_dimensions lists the
  // embedding sizes a request may ask for. Any other key is refused by name. "": none.
  std::string hf_overrides;
  // vLLM's pooler_config as JSON text: {"pooling_type": "LAST" | "MEAN" | "CLS", "normalize": bool,
  // "use_activation": bool}, over the checkpoint's own choice. "": the checkpoint's.
  std::string pooler_config;

  // Every knob equal (LLMEngine keeps its engine while set_engine_args changes none).
  bool operator==(const EngineArgs&) const = default;
};

// The knobs a user sets by name — vLLM's LLM(...) keyword arguments, the EngineArgs member names
// ("max_num_seqs", "speculative_config", ...) — in `ditto serve --help` order.
std::vector<std::string> engine_arg_names();
// Whether `name` is one of engine_arg_names().
bool is_engine_arg(const std::string& name);
// Sets the knob `name` from its value as JSON text: a number, a boolean, a string, an object
// (speculative_config), or null for the default where the knob has one (max_model_len=None).
// Sizes (kv_cache_memory) take bytes or text such as "4GiB". Throws Error(kInvalidArgument,
// param = name) naming the knob, the form expected and the value, also for a name that is no knob
// or text that is not JSON.
void set_engine_arg(EngineArgs& args, const std::string& name, const std::string& json_value);

}  // namespace ditto
