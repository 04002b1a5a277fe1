// The engine loop: requests in, one scheduler step at a time through the model, sampled tokens
// out. Every request is answered exactly as if it were alone: the scheduler only decides *when* a
// token is computed, never *how* (kernels are batch-invariant; K/V depend only on the tokens;
// sampling depends only on (seed, choice, position)).
// Thread-safety: none; one thread drives an Engine.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ditto/sampling_params.h"
#include "engine/input_processor.h"
#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/speculative.h"
#include "model/causal_lm.h"

namespace ditto {

class Tokenizer;

struct EngineConfig {
  int64_t block_size = 16;  // KV cache block, tokens
  // Test double (null in real use): sees every logits row before sampling, with the number of
  // sequences in the step — lets the invariance harness prove it detects batch dependence.
  using LogitsHook = std::function<void(float* logits, int64_t vocab_size, int64_t batch_sequences)>;
  LogitsHook logits_hook;
  int64_t num_kv_blocks = 0;  // KV cache size in blocks (see kv_blocks_for_memory)
  int64_t max_model_len = 0;  // context in tokens (prompt + output); 0: max_position_embeddings
  int64_t max_logprobs = 20;  // top-N bound for logprobs and prompt_logprobs (vLLM's)
  LogprobsMode logprobs_mode = LogprobsMode::kRawLogprobs;  // what logprobs report (EngineArgs')
  bool enable_prefix_caching = true;
  // Every finished choice carries CompletionOutput::routed_experts (engine/routed_experts.h); a
  // model without MoE layers is refused (EngineArgs::enable_return_routed_experts).
  bool enable_return_routed_experts = false;
  SchedulerConfig scheduler;
  // Speculative decoding (off by default); outputs are the same bits either way. "draft_model"
  // needs draft_model, loaded with the same vocabulary (not owned; it must outlive the engine).
  SpeculativeConfig speculative;
  const CausalLM* draft_model = nullptr;
  // Test double (null in real use): replaces the proposer the speculative config would make, and
  // turns speculation on with speculative.num_speculative_tokens guesses per step.
  std::shared_ptr<Proposer> proposer;
};

// The limits requests to an engine of `config` over a model of `model_config` are checked against.
InputLimits input_limits_for(const ModelConfig& model_config, const EngineConfig& config);

// Blocks of `block_size` tokens that fit in `bytes` of bf16 KV cache for `config`.
int64_t kv_blocks_for_memory(const ModelConfig& config, int64_t block_size, int64_t bytes);

class Engine {
 public:
  // tokenizer may be null (then outputs carry ids only and stop strings are refused).
  // eos_token_ids: generation_config.json's / tokenizer_config.json's.
  // Throws Error(kInvalidArgument) for a bad configuration (no KV blocks, bad limits).
  Engine(const CausalLM& model, const Tokenizer* tokenizer, std::vector<int32_t> eos_token_ids,
         const EngineConfig& config);
  ~Engine();

  // Queues a request that came through the front door (InputProcessor::process, with this
  // engine's limits: input_limits_for). Throws Error(kInvalidArgument) for a request_id already unfinished
  // and queues nothing then.
  void add(EngineRequest request);

  // Token ids through the front door and then add(): max_tokens is cut to the context
  // (MaxTokensRule::kClipToContext). Throws what InputProcessor::process and add() throw —
  // empty prompt, a token id outside the vocabulary, a prompt that leaves no room in the
  // context, a request that cannot fit in the KV cache even alone, a sampling parameter out of
  // range — and queues nothing in that case. Messages do not repeat request_id.
  void add_request(const std::string& request_id, std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                   const std::string& prompt_text = "");

  // Runs one step. Returns the requests that finished in it and, for kDelta requests, a report of
  // what each that progressed produced (request_output.h).
  std::vector<RequestOutput> step();

  // Stops a request; its blocks are freed and it is returned by the next step() with
  // finish_reason "abort". Unknown or finished: no-op.
  void abort(const std::string& request_id);

  // The tokens sampled in the last step() by each request that sampled any (request_id, count), for
  // every output kind: a kFinalOnly request's progress, for the server's latency metrics.
  const std::vector<std::pair<std::string, int64_t>>& last_step_tokens() const { return last_step_tokens_; }
  // Each request that ran tokens in the last step() (request_id, its sequences' preemptions so
  // far), for the server's per-request metrics: the first step that lists a request is when it was
  // first scheduled (vLLM's scheduled_ts).
  const std::vector<std::pair<std::string, int64_t>>& last_step_scheduled() const { return last_step_scheduled_; }

  bool has_unfinished() const { return num_unfinished_ > 0; }
  // Gives memory a burst left behind back to the operating system, for an idle server: the forward
  // pass's activation buffers, and the pages of the KV blocks that hold nothing (free, not in the
  // prefix cache); with drop_prefix_cache it first empties the prefix cache of free blocks (as
  // vLLM's reset_prefix_cache), so every free block goes. Changes no result (a prefix-cache hit and
  // a recomputation give the same bits). Returns the KV bytes released (this process only: under
  // tensor parallelism, rank 0's shard).
  int64_t release_idle_memory(bool drop_prefix_cache);
  int64_t num_unfinished() const { return num_unfinished_; }
  int64_t num_steps() const { return num_steps_; }
  const Scheduler& scheduler() const { return scheduler_; }
  const KvCacheManager& kv_cache() const { return kv_; }
  const SpeculationStats& speculation_stats() const { return speculation_stats_; }

 private:
  struct Request;
  // step()'s parts, in order.
  void propose();
  std::vector<SequenceStep> prepare_inputs(const std::vector<ScheduledSequence>& batch);
  void apply_logits_hook(std::vector<float>& logits, size_t batch_sequences) const;
  void process_outputs(const std::vector<ScheduledSequence>& batch, const std::vector<SequenceStep>& steps,
                       const StepOutputs& out, std::vector<int64_t>& touched);
  static void pooling_rows(const PoolingSpec& spec, const Sequence& seq, int64_t num_tokens, SequenceStep& step);
  void pool(Sequence& seq, Request& req, std::span<const float> hidden, const float* logits);
  std::vector<RequestOutput> report(std::vector<int64_t> touched);

  void record_prompt_logprobs(const Sequence& seq, Request& req, const float* logits, int64_t rows);
  void finish_sequence(Sequence& seq, FinishReason reason, std::optional<int32_t> stop_token_id = std::nullopt,
                       std::optional<std::string> message = std::nullopt);
  // Samples `seq`'s next token from `logits` [vocab_size] f32, under `grammar_mask` (empty: none).
  void process_row(Sequence& seq, const float* logits, std::span<const uint32_t> grammar_mask = {});
  static std::string grammar_failure(const GrammarMatcher& m);
  // The structured-output masks of the step's rows (grammar_masks_), from the matchers' state.
  void compute_grammar_masks(const std::vector<ScheduledSequence>& batch);
  // Samples `rows` rows for a decode that ran with `num_proposals` guesses (rows = 1 + guesses),
  // keeping guesses while they equal the sampled token. Returns the tokens sampled.
  int64_t verify(Sequence& seq, const float* logits, int64_t num_proposals, std::span<const uint32_t> grammar_masks);

  const CausalLM& model_;
  std::vector<int32_t> eos_token_ids_;
  EngineConfig config_;
  InputProcessor processor_;  // token-id requests of add_request()
  OutputProcessor output_;    // every request's outputs, by engine index
  KvCacheManager kv_;
  ModelRunner runner_;
  Scheduler scheduler_;
  Sampler sampler_;
  std::shared_ptr<Proposer> proposer_;  // null: no speculation
  SpeculationStats speculation_stats_;
  std::vector<std::vector<int32_t>> verify_tokens_;  // the step's decode-and-guesses token runs
  // Per scheduled sequence of the step: the grammar masks of the rows it samples ([rows,
  // mask_words] uint32, row j after its guesses 0..j-1), empty when it samples none or has no
  // constraint. Computed beside the forward pass (step()).
  std::vector<std::vector<uint32_t>> grammar_masks_;
  // Live requests and sequences by engine index (finished ones are erased, so a long-running
  // server's engine stays the size of its current load).
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;
  std::unordered_map<std::string, int64_t> request_index_;  // request_id → key of requests_
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> sequences_;
  int64_t next_request_ = 0;
  int64_t next_sequence_ = 0;
  int64_t next_arrival_ = 0;
  int64_t num_unfinished_ = 0;
  int64_t num_steps_ = 0;
  std::vector<int64_t> aborted_;  // request indices aborted since the last step
  std::vector<std::pair<std::string, int64_t>> last_step_tokens_;
  std::vector<std::pair<std::string, int64_t>> last_step_scheduled_;
};

}  // namespace ditto
