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
// Several processes: EngineArgs::tensor_parallel_size and serve_as_tensor_parallel_rank (below).
// Part of ditto's public C++ API: `find_package(ditto)` + `target_link_libraries(app ditto::ditto)`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ditto/beam_search.h"
#include "ditto/engine_args.h"
#include "ditto/error.h"
#include "ditto/pooling.h"
#include "ditto/prompt_input.h"
#include "ditto/request_output.h"
#include "ditto/sampling_params.h"
#include "ditto/weight_transfer.h"

namespace ditto {

class LLMEngine;

// A request that could not run carries its error; the others of the batch complete.
struct GenerateResult {
  RequestOutput output;
  std::optional<std::string> error;  // "prompt I: why", naming the field at fault
};

// How far a generate() batch is: requests finished (or refused) of all, and the prompt and
// generated tokens of the finished ones.
struct GenerateProgress {
  size_t done = 0;
  size_t total = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

// Called with each result (prompt index, result) as soon as it is final; it may move the output
// out when GenerateOptions::return_outputs is false.
using ResultFn = std::function<void(size_t index, GenerateResult& result)>;
// Called with each kDelta report (prompt index, report) of a streaming generate.
using DeltaFn = std::function<void(size_t index, const RequestOutput& delta)>;
// Called before every engine step and once at the end (its result then ignored); false aborts
// every unfinished request (each ends with finish_reason "abort").
using StepFn = std::function<bool(const GenerateProgress& progress)>;

// What a generate() call may add to its prompts and parameters; every field is optional.
struct GenerateOptions {
  // One per prompt: how its max_tokens is settled against the context. Empty: kClipToContext for
  // every prompt (vLLM's offline rule).
  std::vector<MaxTokensRule> max_tokens_rules;
  // One per prompt, the RequestOutput::request_id. Empty: "0", "1", ....
  std::vector<std::string> request_ids;
  // A progress line on stderr (when it is a terminal).
  bool progress_bar = false;
  // Each result as soon as it is final: a refused request right away (before the first step), the
  // others as they finish, so not in input order.
  ResultFn on_result;
  // Set: every request streams; each kDelta report goes here (LLM::generate_stream).
  DeltaFn on_delta;
  // Progress before every engine step; returning false aborts the batch.
  StepFn on_step;
  // One per prompt (or empty): from this prompt position on, each prompt_logprobs entry is what the
  // sampler would have reported for drawing that token — the request's SamplingParams and the
  // engine's logprobs_mode, the tokens from rescore_from on counting as the output so far
  // (penalties, bad_words, min_tokens) — so a finished output fed back as a prompt with
  // rescore_from = its prompt length re-scores it as it was sampled, in every logprobs_mode
  // (docs/NUMERICS.md). -1: plain prompt_logprobs (the raw modes' rows).
  std::vector<int64_t> rescore_from;
  // Not empty: every prompt is a pooling request with these parameters (one shared, or one per
  // prompt) and its result is RequestOutput::pooled; `params` are then ignored. LLM::encode's way.
  std::vector<PoolingParams> pooling;
  // false: the returned results keep only request ids and errors, each output living only until
  // on_result has seen it (a batch of large outputs, such as full-vocabulary logprobs, then holds
  // only the unfinished ones).
  bool return_outputs = true;
};

// The loaded model, as a front end needs to describe it.
struct ModelInfo {
  std::string model_dir;  // the directory or GGUF file loaded (a hub id resolved in the local cache)
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;  // the context every request must fit (EngineArgs::max_model_len or the model's)
  // Without a tokenizer only token-id prompts run (text, chats and stop strings are refused).
  bool has_tokenizer = false;
  std::vector<int32_t> eos_token_ids;
  std::optional<int32_t> bos_token_id;
  // The load: tensors read, their bytes in memory, and the seconds it took.
  int64_t num_tensors = 0;
  int64_t weight_bytes = 0;
  double load_seconds = 0.0;
  // OpenAI's system_fingerprint, "fp_" + 16 hex digits: a hash of the weight files' contents (a
  // GGUF file, or a directory's .safetensors files), the build's numerics version and the
  // instruction-set class (one for all: every ISA gives the same bits). Two engines with the same
  // fingerprint answer a request with the same bits; the server reports it in every response.
  std::string system_fingerprint;
  // Pooling (include/ditto/pooling.h): "pooling" when the model answers encode / embed / score
  // (--runner pooling, --task, or its sentence-transformers files), else "generate"; the task
  // ("embed" or "score"; "" for generate), the pooling type ("LAST", "MEAN", "CLS") and the
  // embedding width (hidden_size: the most dimensions a request may ask for).
  std::string runner = "generate";
  std::string pooling_task;
  std::string pooling_type;
  int64_t hidden_size = 0;
};

// What LLM::score computes per position.
struct ScoreOptions {
  // The most likely tokens reported at each position beside the scored one, in [1, vocab_size];
  // -1: the whole vocabulary (every token's logprob: vocab_size entries).
  int64_t top_logprobs = 1;
  // Also the distribution after the last token (the scored output's outputs[0].logprobs[0]).
  bool next_token = false;
};

class LLM {
 public:
  // Loads the model, tokenizer and chat template. Throws Error naming the file or field at fault;
  // Error(kResourceExhausted) when the weights or the KV cache do not fit in the memory available.
  explicit LLM(const EngineArgs& args);
  ~LLM();
  LLM(const LLM&) = delete;
  LLM& operator=(const LLM&) = delete;

  // Runs every prompt with its parameters (params.size() == 1: shared) and returns the results
  // in input order. A bad prompt or parameter becomes that result's error; the rest still run.
  // `options` sets request ids, max_tokens rules, a progress bar and the callbacks (above); the
  // returned vector holds every result in input order whatever the callbacks saw. Throws
  // Error(kInvalidArgument) when params.size() is neither 1 nor prompts.size(), or when
  // options.max_tokens_rules or options.request_ids is neither empty nor one per prompt.
  // The LLM keeps one engine from call to call, as vLLM's does: a prompt that begins with blocks
  // an earlier call computed finds them in the prefix cache (RequestOutput::num_cached_tokens
  // counts them) and gets the same bits as recomputing them.
  std::vector<GenerateResult> generate(const std::vector<PromptInput>& prompts,
                                       const std::vector<SamplingParams>& params, const GenerateOptions& options = {});
  // generate() with only a progress bar and on_result.
  std::vector<GenerateResult> generate(const std::vector<PromptInput>& prompts,
                                       const std::vector<SamplingParams>& params, bool progress,
                                       const ResultFn& on_result = nullptr);

  // Text prompts, one shared SamplingParams. Throws Error for the first bad request.
  std::vector<RequestOutput> generate(const std::vector<std::string>& prompts, const SamplingParams& params);

  // Streaming: generate() whose requests are reported as they progress. After every engine step
  // that produced something for prompt `index`, on_delta(index, report) gets a report holding only
  // what is new (RequestOutputKind::kDelta, whatever params' output_kind says; request_output.h):
  // one request's reports in order, different requests' interleaved, the last with finished set.
  // Returns what generate() returns — each result the reports appended, the same bits as
  // generate() gives for the same prompts and parameters. A refused prompt gets no report; its
  // result carries the error. Throws as generate().
  std::vector<GenerateResult> generate_stream(const std::vector<PromptInput>& prompts,
                                              const std::vector<SamplingParams>& params, const DeltaFn& on_delta);

  // The tokenizer, through the same front door as generate(): a text prompt's token ids (with the
  // tokenizer's special tokens when add_special_tokens) or a chat's (rendered with the model's
  // template); throws Error(kInvalidArgument) naming the field for a bad prompt, or when the model
  // has no tokenizer (or, for a chat, no chat template).
  std::vector<int32_t> tokenize(const PromptInput& prompt) const;
  // A chat's prompt as text, as the model's chat template renders it (apply_chat_template).
  std::string render_chat(const PromptInput& chat) const;
  // Token ids as text; skip_special_tokens drops special tokens (as SamplingParams' field).
  std::string detokenize(const std::vector<int32_t>& token_ids, bool skip_special_tokens = true) const;
  // One vocabulary entry as the tokenizer stores it ("Ġthe", "<|im_end|>"), and back; nullopt for
  // an id out of range, a string not in the vocabulary, or a model without a tokenizer.
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(const std::string& token) const;
  // tokenizer_config.json as the tokenizer read it (a GGUF file's: built from its tokenizer keys),
  // as JSON text; "{}" without a tokenizer.
  std::string tokenizer_config_json() const;

  // Teacher forcing: for every position p ≥ 1 of each token-id sequence, log P(ids[p] | ids[0..p-1])
  // and the options.top_logprobs most likely tokens there, as the RequestOutput's prompt_logprobs
  // (entry 0 empty: the first token has no context); with options.next_token, outputs[0].logprobs[0]
  // is the distribution after the last token. Each sequence runs through the front door as a
  // greedy request for one token; sequences share engine steps of at most 256 tokens (a memory
  // bound; chunking changes no bit), one at a time when top_logprobs is -1, and each one's numbers
  // are the bits it gets alone. on_scored(index, output) gets the outputs in sequence order, each
  // as soon as every earlier one has come. Throws Error(kInvalidArgument) naming "sequence I"
  // before any output when a sequence has fewer than two tokens (one is enough with next_token), a
  // token out of the vocabulary, or no position left in the context for the token after it.
  // Scoring's engine limits differ from generate()'s, so it drops the prefix cache generate() keeps.
  using ScoreFn = std::function<void(size_t index, RequestOutput&& output)>;
  void score(const std::vector<std::vector<int32_t>>& sequences, const ScoreOptions& options, const ScoreFn& on_scored);

  // Pooling (vLLM's LLM.encode / embed / score; include/ditto/pooling.h): each prompt runs through
  // the front door as a pooling request and returns its vector (embed) or relevance (score), the
  // same bits alone or in any batch. params: one shared, or one per prompt. A bad prompt or
  // parameter becomes that result's error, naming the field ("input", "dimensions", ...); the rest
  // still run. Throws Error(kInvalidArgument, param "model") when the model does not pool (start
  // it with runner "pooling" or task "embed" / "score"), and when params.size() is neither 1 nor
  // prompts.size(). `progress`: a progress line on stderr (a terminal only).
  std::vector<PoolingResult> encode(const std::vector<PromptInput>& prompts, const std::vector<PoolingParams>& params,
                                    bool progress = false);
  // encode() with task "embed": each output's data is the embedding, [dimensions or hidden_size] f32.
  std::vector<PoolingResult> embed(const std::vector<PromptInput>& prompts, const PoolingParams& params = {});
  // Relevance of each (text_1, text_2) pair, vLLM's LLM.score: text_1 holds one query (paired with
  // every text_2) or as many as text_2. A reranker (task "score") renders each pair with its score
  // template (Qwen3-Reranker's prompt, or --chat-template; chat_template_kwargs such as
  // {"instruction": "..."} reach it) and returns sigmoid(logit(yes) − logit(no)); an embedding
  // model embeds every text once and returns the cosine of each pair's embeddings. Each output's
  // data is [1] f32; prompt_token_ids are the rendered pair's (reranker) or empty (embeddings).
  // Throws as encode(), and Error(kInvalidArgument, param "text_1") when the counts do not pair.
  std::vector<PoolingResult> score(const std::vector<std::string>& text_1, const std::vector<std::string>& text_2,
                                   const PoolingParams& params = {}, const std::string& chat_template_kwargs = "");

  // Beam search with vLLM's semantics (LLM.beam_search; include/ditto/beam_search.h): one output
  // per prompt, its at most beam_width best sequences by length-penalised score, best first. Each
  // step runs every live beam of every prompt as a one-token request asking for 2·beam_width raw
  // logprobs; the candidates of temperature > 0 are keyed by `seed` (derived per step and beam).
  // A prompt's beams are the same bits alone or beside any others. Throws Error(kInvalidArgument)
  // naming the parameter (beam_width above max_logprobs / 2, ...) or "prompt I" for a bad prompt,
  // before any step.
  std::vector<BeamSearchOutput> beam_search(const std::vector<PromptInput>& prompts, const BeamSearchParams& params,
                                            uint64_t seed = 0);

  // Empties the prefix cache the LLM keeps between generate() calls (vLLM's
  // LLM.reset_prefix_cache) and gives back the KV pages and buffers it held; outputs stay the
  // same bits, later prompts are recomputed. Returns false, dropping nothing, while requests run
  // (called from a generate() callback), else true.
  bool reset_prefix_cache();

  // Weights updated in place, vLLM's weight-transfer API (ditto/weight_transfer.h, docs/RL.md):
  // start_weight_update(), update_weights() any number of times, finish_weight_update(version).
  // Tensors go by Hugging Face name, each checked against the model's tensor list (name, shape,
  // dtype — a matrix in the dtype the checkpoint holds it, bytes); a refused chunk throws
  // Error(kInvalidArgument) naming the tensor and cancels the whole update, the old weights
  // serving bit for bit. The tensors' bytes are borrowed until finish_weight_update returns.
  // After it, generation equals an LLM loaded from a checkpoint holding the new tensors, bit for
  // bit; no prefix-cache hit crosses versions. start_weight_update throws Error(kInvalidArgument)
  // for a model loaded from GGUF (its weights are GGUF's types: give a Hugging Face directory),
  // while generate() runs (from a callback), or with an update in progress (under tensor
  // parallelism rank 0 takes the whole tensors and sends each rank its rows at the finish);
  // generate() refuses to run between start and finish.
  void start_weight_update();
  void update_weights(const std::vector<WeightTensor>& tensors);
  // The shm transport: init_info_json {"path": FILE} names the file the trainer writes (e.g. under
  // /dev/shm); update_info_json {"names", "dtype_names", "shapes", "offsets"} says where each
  // tensor's bytes are in it (engine/weight_transfer.h). Errors name the field.
  void init_weight_transfer_engine(const std::string& init_info_json);
  void update_weights(const std::string& update_info_json);
  // `weight_version`: the opaque version string outputs carry from now on (empty: "1", "2", ...
  // counting updates).
  void finish_weight_update(const std::string& weight_version = "");
  // Drops the update in progress (nothing of it was applied); a no-op without one.
  void cancel_weight_update();
  // The weights' version: "0" as loaded, then what the last finish_weight_update set.
  const std::string& weight_version() const;
  // vLLM's sleep(level) / wake_up: level 1 gives back the KV cache, activation buffers and prefix
  // cache (the weights stay: on a CPU they are already in host memory); level 2 also the weights'
  // pages, after which every tensor must be sent (the calls above) before wake_up. generate()
  // refuses to run while asleep. Throw Error(kInvalidArgument) as LLMEngine::sleep / wake_up.
  void sleep(int level = 1);
  void wake_up();
  bool is_sleeping() const;

  // The model's default sampling parameters, which the front door applies to every request.
  const GenerationDefaults& generation_defaults() const;
  const ModelInfo& model_info() const;

  // What the last generate() (or score()) call did: its engine steps, preemptions, prefix-cache
  // lookups and hits (tokens), and speculative decoding's counters — that call's alone.
  struct Stats {
    int64_t steps = 0;
    int64_t preemptions = 0;
    int64_t prefix_query_tokens = 0;
    int64_t prefix_hit_tokens = 0;
    // Speculative decoding (vLLM's spec_decode counters): verifications with guesses, tokens
    // guessed, and guesses accepted (equal to the token the model sampled there).
    int64_t spec_decode_num_drafts = 0;
    int64_t spec_decode_num_draft_tokens = 0;
    int64_t spec_decode_num_accepted_tokens = 0;
  };
  const Stats& last_stats() const;

  const EngineArgs& args() const;

 private:
  friend class AsyncLLM;  // runs its own engine thread over this LLM's model and front door
  std::unique_ptr<LLMEngine> engine_;
  ModelInfo info_;
};

// Tensor parallelism (EngineArgs::tensor_parallel_size N > 1, the program started N times by
// `mpirun -np N`): call this first on every rank, before any LLM. On ranks other than 0 it serves
// rank 0 (loads its shard, joins every forward pass) until rank 0's program ends, then returns
// true: that rank has nothing more to do. On rank 0, and for N = 1, it returns false at once, and
// rank 0 goes on to construct its LLM. Rank 0 releases the other ranks when it exits.
// Throws Error(kInvalidArgument) when not started by mpirun, when mpirun started another number
// of processes, or when the ranks run different ditto builds.
bool serve_as_tensor_parallel_rank(int tensor_parallel_size);

// Rank 0: releases the other ranks now (they return from serve_as_tensor_parallel_rank), as the
// end of rank 0's program does; for an interpreter that ends otherwise (Python's atexit). After
// it no LLM of this process may run. Does nothing without tensor parallelism.
void shutdown_tensor_parallel();

}  // namespace ditto
