#include "engine/llm_engine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <new>
#include <string>
#include <unordered_map>

#include "checkpoint/hub.h"
#include "core/error.h"
#include "core/memory_info.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "engine/generation_defaults.h"
#include "engine/model_files.h"
#include "engine/output_processor.h"
#include "engine/routed_experts.h"
#include "engine/system_fingerprint.h"
#include "model/causal_lm.h"
#include "parallel/tensor_parallel.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ditto {

LLMEngine::LLMEngine(const EngineArgs& args) : args_(args) {
  model_dir_ = resolve_model_path(args.model);
  pool_ = std::make_unique<ThreadPool>(args.threads > 0 ? args.threads : default_num_threads());
  TensorParallelGroup* tp = nullptr;
  if (args.tensor_parallel_size > 1) {
    tp = TensorParallelGroup::initialize(args.tensor_parallel_size);
    if (tp->rank() != 0)
      throw_invalid_argument("tensor-parallel rank " + std::to_string(tp->rank()) +
                             " cannot run an engine: only rank 0 does, the others serve it "
                             "(serve_as_tensor_parallel_rank)");
  }
  model_ = CausalLM::load(model_dir_, pool_.get(), tp);
  {
    const auto start = std::chrono::steady_clock::now();
    weights_hash_ = hash_weight_files(model_dir_);
    system_fingerprint_ = ditto::system_fingerprint(weights_hash_);
    fingerprint_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // The KV cache is allocated when an engine starts; say now if it cannot fit.
  if (const std::optional<int64_t> available = mem_available_bytes(); available && args.kv_cache_memory > *available)
    throw Error(ErrorCode::kResourceExhausted,
                "kv_cache_memory (--kv-cache-memory) is " + format_gib(args.kv_cache_memory) + " but only " +
                    format_gib(*available) + " is available after loading the model (MemAvailable, /proc/meminfo)");
  try {
    tokenizer_ = load_tokenizer(model_dir_);
    if (args.chat_template.empty()) chat_template_ = std::make_unique<ChatTemplate>(load_chat_template(model_dir_));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotFound) throw;
  }
  if (!args.chat_template.empty())  // asked for: its errors are the caller's
    chat_template_ = std::make_unique<ChatTemplate>(load_chat_template(model_dir_, args.chat_template));
  // Stop at generation_config.json's eos_token_id (else config.json's) and the tokenizer's
  // eos_token, as vLLM does.
  for (int64_t id : model_eos_token_ids(model_dir_, model_->config()))
    eos_token_ids_.push_back(static_cast<int32_t>(id));
  if (tokenizer_)
    for (int32_t id : tokenizer_->eos_token_ids())
      if (std::find(eos_token_ids_.begin(), eos_token_ids_.end(), id) == eos_token_ids_.end())
        eos_token_ids_.push_back(id);
  pooler_ = resolve_pooler_config(args, model_dir_, model_->config(), tokenizer_.get());
  set_engine_args(args);
}

LLMEngine::~LLMEngine() = default;

const Tokenizer& LLMEngine::tokenizer() const {
  if (tokenizer_ == nullptr)
    throw_not_found(model_dir_ + ": the model has no tokenizer (no tokenizer.json / tokenizer.ggml.tokens)");
  return *tokenizer_;
}

namespace {

std::string resolve_draft_path(const std::string& model) {
  try {
    return resolve_model_path(model);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("speculative_config: the draft model: ") + e.what());
  }
}

// An engine's counters since it was made.
LLM::Stats engine_stats(const Engine& engine) {
  LLM::Stats s;
  s.steps = engine.num_steps();
  s.preemptions = engine.scheduler().num_preemptions();
  s.prefix_query_tokens = engine.kv_cache().stats().prefix_queries_tokens;
  s.prefix_hit_tokens = engine.kv_cache().stats().prefix_hit_tokens;
  s.spec_decode_num_drafts = engine.speculation_stats().num_drafts;
  s.spec_decode_num_draft_tokens = engine.speculation_stats().num_draft_tokens;
  s.spec_decode_num_accepted_tokens = engine.speculation_stats().num_accepted_tokens;
  return s;
}

// One redraw of generate's bar: requests done; while prompt tokens remain to compute, those too,
// and the estimate follows them (the finished requests' prompts and the running ones' computed
// part; a waiting or preempted request's count as not yet).
void draw_progress(ProgressBar& bar, const GenerateProgress& at, const Engine& engine, int64_t prompt_tokens_total) {
  int64_t computed = at.prompt_tokens;
  for (const Sequence* seq : engine.scheduler().running())
    computed += std::min(seq->num_computed_tokens, seq->num_prompt_tokens);
  const auto done = static_cast<int64_t>(at.done);
  if (computed >= prompt_tokens_total || prompt_tokens_total == 0) {
    bar.update(done, "decoding");
    return;
  }
  bar.update(done,
             std::string("prefill ") + std::to_string(computed) + "/" + std::to_string(prompt_tokens_total) + " tokens",
             static_cast<double>(computed) / static_cast<double>(prompt_tokens_total));
}

}  // namespace

void LLMEngine::set_engine_args(const EngineArgs& args) {
  const EngineArgs loaded = args_;
  args_ = args;
  args_.model = loaded.model;
  args_.threads = loaded.threads;
  args_.tensor_parallel_size = loaded.tensor_parallel_size;
  args_.chat_template = loaded.chat_template;
  args_.runner = loaded.runner;  // the pooling knobs are the model's, resolved once at load
  args_.task = loaded.task;
  args_.hf_overrides = loaded.hf_overrides;
  args_.pooler_config = loaded.pooler_config;
  // generate()'s engine was built for the old values (and may point at the old draft model).
  if (!(args_ == loaded)) engine_.reset();
  const ModelConfig& c = model_->config();
  if (args_.max_model_len < 0 || args_.max_model_len > c.max_position_embeddings)
    throw_invalid_field("max_model_len",
                        "max_model_len (--max-model-len) must be in [1, " + std::to_string(c.max_position_embeddings) +
                            "] (the model's max_position_embeddings), got " + std::to_string(args_.max_model_len));
  if (args_.max_logprobs < 0) throw_invalid_field("max_logprobs", "max_logprobs must be at least 0");
  if (args_.long_prefill_token_threshold < 0)
    throw_invalid_field("long_prefill_token_threshold",
                        "long_prefill_token_threshold (--long-prefill-token-threshold) must be at least 0 (0: a "
                        "quarter of max_num_batched_tokens), got " +
                            std::to_string(args_.long_prefill_token_threshold));
  args_.speculative_config = checked_speculative_config(args_.speculative_config);
  const SpeculativeConfig& sc = args_.speculative_config;
  // A draft stays loaded while speculation is off (a benchmark toggles it); a new one replaces it.
  if (const std::string dir = sc.method == "draft_model" ? resolve_draft_path(sc.model) : "";
      !dir.empty() && (draft_ == nullptr || dir != draft_dir_)) {
    // On rank 0 alone, whole: it only proposes, so where it runs changes no bit.
    std::unique_ptr<CausalLM> draft;
    try {
      draft = CausalLM::load(dir, pool_.get(), nullptr);
    } catch (const Error& e) {
      throw Error(e.code(), std::string("speculative_config: the draft model: ") + e.what());
    }
    if (draft->config().vocab_size != c.vocab_size)
      throw_invalid_field("speculative_config", "speculative_config: the draft model " + dir + " has vocab_size " +
                                                    std::to_string(draft->config().vocab_size) + ", the model " +
                                                    std::to_string(c.vocab_size) +
                                                    " (a draft needs the model's tokenizer)");
    draft_ = std::move(draft);
    draft_dir_ = dir;
  }
  const EngineConfig config = engine_config();
  if (config.enable_return_routed_experts) check_routed_experts_supported(c);
  if (config.num_kv_blocks < 1)
    throw_invalid_field("kv_cache_memory", "kv_cache_memory " + std::to_string(args_.kv_cache_memory) +
                                               " bytes holds no KV block of this model");
  if (config.draft_model != nullptr) {
    // The draft's KV cache holds as many blocks as the model's, beside kv_cache_memory: say now if
    // both cannot fit (MemAvailable, after both models are loaded).
    const ModelConfig& d = config.draft_model->config();
    const int64_t draft_kv =
        config.num_kv_blocks * d.num_hidden_layers * 2 * config.block_size * d.num_key_value_heads * d.head_dim * 2;
    if (const std::optional<int64_t> available = mem_available_bytes();
        available && args_.kv_cache_memory + draft_kv > *available)
      throw Error(ErrorCode::kResourceExhausted,
                  "speculative_config: the draft model's KV cache (" + format_gib(draft_kv) +
                      ") and kv_cache_memory (" + format_gib(args_.kv_cache_memory) + ") need more than the " +
                      format_gib(*available) + " available (MemAvailable, /proc/meminfo); lower --kv-cache-memory");
  }
  processor_ = std::make_unique<InputProcessor>(input_limits_for(c, config), tokenizer_.get(), chat_template_.get(),
                                                model_generation_defaults(model_dir_, args_.generation_config), pooler_,
                                                eos_token_ids_);
}

EngineConfig LLMEngine::engine_config() const {
  EngineConfig config;
  config.block_size = args_.block_size;
  config.num_kv_blocks = kv_blocks_for_memory(model_->config(), args_.block_size, args_.kv_cache_memory);
  config.max_model_len = args_.max_model_len;
  config.max_logprobs = args_.max_logprobs;
  config.logprobs_mode = args_.logprobs_mode;
  config.enable_prefix_caching = args_.enable_prefix_caching;
  config.enable_return_routed_experts = args_.enable_return_routed_experts;
  config.scheduler.max_num_batched_tokens = args_.max_num_batched_tokens;
  config.scheduler.max_num_seqs = args_.max_num_seqs;
  config.scheduler.long_prefill_token_threshold = args_.long_prefill_token_threshold;
  config.speculative = args_.speculative_config;
  config.draft_model = config.speculative.method == "draft_model" ? draft_.get() : nullptr;
  return config;
}

namespace {

void refuse_during_update(const char* call, bool in_progress) {
  if (in_progress)
    throw_invalid_argument(std::string(call) +
                           ": a weight update is in progress (start_weight_update without finish_weight_update); "
                           "finish it first");
}

// What a refused chunk's error adds.
constexpr const char* kCancelled =
    "; the update is cancelled (nothing of it was applied: the old weights keep serving); start again with "
    "start_weight_update";

}  // namespace

void LLMEngine::start_weight_update() {
  if (update_ != nullptr)
    throw_invalid_argument("start_weight_update: an update is already in progress; call finish_weight_update first");
  if (engine_ != nullptr && engine_->has_unfinished())
    throw_invalid_argument("start_weight_update: requests are running; the engine must be idle to update its weights");
  update_ = std::make_unique<WeightUpdate>(*model_);
}

void LLMEngine::update_weights(std::span<const WeightTensor> tensors) {
  if (update_ == nullptr)
    throw_invalid_argument("update_weights: no weight update in progress; call start_weight_update first");
  try {
    update_->add(tensors);
  } catch (const Error& e) {
    update_.reset();
    update_mappings_.clear();
    throw Error(e.code(), std::string(e.what()) + kCancelled);
  }
}

void LLMEngine::cancel_weight_update() {
  update_.reset();
  update_mappings_.clear();
}

void LLMEngine::drop_weights() {
  refuse_during_update("drop_weights", update_ != nullptr);
  if (model_->is_gguf())
    throw_invalid_field("level",
                        "sleep: level 2 drops the weights, and a model loaded from GGUF cannot be sent new ones "
                        "(weight updates need a Hugging Face directory); use level 1");
  if (engine_ != nullptr) engine_->release_idle_memory(/*drop_prefix_cache=*/true);
  drop_weight_pages(*model_);
  weights_dropped_ = true;
}

void LLMEngine::sleep(int level) {
  if (level != 1 && level != 2) throw_invalid_argument("sleep: level must be 1 or 2, got " + std::to_string(level));
  if (level == 2 && model_->is_gguf())
    throw_invalid_field("level",
                        "sleep: level 2 drops the weights, and a model loaded from GGUF cannot be sent new ones "
                        "(weight updates need a Hugging Face directory); use level 1");
  refuse_during_update("sleep", update_ != nullptr);
  if (engine_ != nullptr && engine_->has_unfinished())
    throw_invalid_argument("sleep: requests are running (called from a generate() callback)");
  if (engine_ != nullptr) engine_->release_idle_memory(/*drop_prefix_cache=*/true);
  if (level == 2 && !weights_dropped_) drop_weights();
  sleeping_ = true;
}

void LLMEngine::wake_up() {
  if (weights_dropped_)
    throw_invalid_argument(
        "wake_up: sleep(level=2) dropped the weights; send every tensor (start_weight_update, update_weights, "
        "finish_weight_update) first");
  sleeping_ = false;
}

void LLMEngine::init_weight_transfer_engine(const std::string& shm_path) { shm_path_ = shm_path; }

void LLMEngine::update_weights_from_shm(const WeightUpdateInfo& info) {
  if (shm_path_.empty())
    throw_invalid_argument(
        "update_weights: no shared file to read the tensors from; call init_weight_transfer_engine with "
        "init_info {\"path\": FILE} first");
  if (update_ == nullptr)
    throw_invalid_argument("update_weights: no weight update in progress; call start_weight_update first");
  auto mapping = std::make_unique<MappedFile>(shm_path_);
  std::vector<WeightTensor> tensors;
  try {
    tensors = tensors_in_file(info, *mapping);
  } catch (const Error& e) {
    update_.reset();
    update_mappings_.clear();
    throw Error(e.code(), std::string(e.what()) + kCancelled);
  }
  update_weights_mapped(tensors, std::move(mapping));
}

void LLMEngine::update_weights_mapped(std::span<const WeightTensor> tensors, std::unique_ptr<MappedFile> mapping) {
  update_mappings_.push_back(std::move(mapping));
  update_weights(tensors);
}

void LLMEngine::finish_weight_update(const std::string& version) {
  if (update_ == nullptr)
    throw_invalid_argument("finish_weight_update: no weight update in progress; call start_weight_update first");
  if (version.size() > 256) {
    cancel_weight_update();
    throw_invalid_field("weight_version", "finish_weight_update: field 'weight_version' has " +
                                              std::to_string(version.size()) +
                                              " characters (at most 256: every response carries it); the update is "
                                              "cancelled");
  }
  // The mapped files must still hold every byte named: one truncated since update_weights would
  // fault on read (SIGBUS) while packing. (A file shrunk during the packing itself still would:
  // the trainer must not touch the file until the finish returns — docs/RL.md.)
  for (const std::unique_ptr<MappedFile>& m : update_mappings_) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(m->path(), ec);
    if (ec || size < m->size()) {
      const std::string path = m->path();
      const size_t mapped = m->size();
      cancel_weight_update();
      throw_invalid_argument("finish_weight_update: " + path + " holds " +
                             (ec ? std::string("nothing") : std::to_string(size) + " bytes") + " now, " +
                             std::to_string(mapped) +
                             " when update_weights read it (it changed before the finish); the update is cancelled: "
                             "the old weights keep serving");
    }
  }
  if (weights_dropped_ && !update_->covers_every_tensor()) {
    cancel_weight_update();
    throw_invalid_argument(
        "finish_weight_update: the weights were dropped (sleep level 2) and this update does not send every tensor; "
        "the update is cancelled: send them all");
  }
  const std::unique_ptr<WeightUpdate> update = std::move(update_);
  if (!update->staged().empty()) {
    weights_hash_ = hash_weight_update(weights_hash_, update->staged());
    system_fingerprint_ = ditto::system_fingerprint(weights_hash_);
  }
  update->apply(pool_.get(), version.empty() ? std::to_string(model_->weights_epoch() + 1) : version);
  update_mappings_.clear();
  weights_dropped_ = false;
  // Its blocks can never be hit again (KvCacheManager::epoch_root): give them back now.
  if (engine_ != nullptr) engine_->release_idle_memory(/*drop_prefix_cache=*/true);
}

std::unique_ptr<Engine> LLMEngine::make_engine(EngineConfig::LogitsHook logits_hook) const {
  refuse_during_update("make_engine", update_ != nullptr);
  EngineConfig config = engine_config();
  config.logits_hook = std::move(logits_hook);
  return std::make_unique<Engine>(*model_, tokenizer_.get(), eos_token_ids_, config);
}

std::vector<GenerateResult> LLMEngine::generate(const std::vector<PromptInput>& prompts,
                                                const std::vector<SamplingParams>& params,
                                                const GenerateOptions& options, EngineConfig::LogitsHook logits_hook) {
  const std::vector<MaxTokensRule>& rules = options.max_tokens_rules;
  const std::vector<std::string>& request_ids = options.request_ids;
  const std::string for_prompts = " for " + std::to_string(prompts.size()) + " prompts";
  if (params.size() != 1 && params.size() != prompts.size())
    throw_invalid_argument("generate: " + std::to_string(params.size()) + " SamplingParams" + for_prompts +
                           " (give one, or one per prompt)");
  if (!rules.empty() && rules.size() != prompts.size())
    throw_invalid_argument("generate: " + std::to_string(rules.size()) + " max_tokens_rules" + for_prompts +
                           " (give none, or one per prompt)");
  if (!request_ids.empty() && request_ids.size() != prompts.size())
    throw_invalid_argument("generate: " + std::to_string(request_ids.size()) + " request_ids" + for_prompts +
                           " (give none, or one per prompt)");
  if (options.pooling.size() > 1 && options.pooling.size() != prompts.size())
    throw_invalid_argument("generate: " + std::to_string(options.pooling.size()) + " PoolingParams" + for_prompts +
                           " (give none, one, or one per prompt)");
  if (!options.rescore_from.empty() && options.rescore_from.size() != prompts.size())
    throw_invalid_argument("generate: " + std::to_string(options.rescore_from.size()) + " rescore_from" + for_prompts +
                           " (give none, or one per prompt)");
  refuse_during_update("generate", update_ != nullptr);
  if (weights_dropped_)
    throw_invalid_argument("generate: the weights were dropped (sleep level 2); update every tensor first");
  if (sleeping_) throw_invalid_argument("generate: the engine is sleeping; call wake_up first");
  const bool hooked = logits_hook != nullptr;
  if (engine_ == nullptr || hooked || engine_has_hook_) {
    engine_.reset();  // before the new one allocates: one KV cache at a time
    engine_ = make_engine(std::move(logits_hook));
    engine_has_hook_ = hooked;
  }
  try {
    return run(prompts, params, options);
  } catch (...) {
    engine_.reset();  // it may hold requests of the failed call
    throw;
  }
}

bool LLMEngine::reset_prefix_cache() {
  if (engine_ == nullptr) return true;
  if (engine_->has_unfinished()) return false;
  engine_->release_idle_memory(/*drop_prefix_cache=*/true);
  return true;
}

std::vector<GenerateResult> LLMEngine::run(const std::vector<PromptInput>& prompts,
                                           const std::vector<SamplingParams>& params, const GenerateOptions& options) {
  const std::vector<MaxTokensRule>& rules = options.max_tokens_rules;
  const std::vector<std::string>& request_ids = options.request_ids;
  const ResultFn& on_result = options.on_result;
  const DeltaFn& on_delta = options.on_delta;
  const StepFn& on_step = options.on_step;
  Engine& engine = *engine_;
  // The engine's counters are its lifetime's; last_stats() is this call's part of them.
  const LLM::Stats before = engine_stats(engine);

  std::vector<GenerateResult> results(prompts.size());
  std::vector<bool> streams(prompts.size(), false);  // reported in kDelta pieces, appended here
  std::unordered_map<std::string, size_t> index;     // request id → prompt index
  GenerateProgress at{.total = prompts.size()};
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = request_ids.empty() ? std::to_string(i) : request_ids[i];
    results[i].output.request_id = id;
    try {
      SamplingParams p = params.size() == 1 ? params[0] : params[i];
      if (on_delta) p.output_kind = RequestOutputKind::kDelta;
      const std::vector<PoolingParams>& pooling = options.pooling;
      EngineRequest r =
          !pooling.empty()
              ? processor_->process_pooling(prompts[i], pooling.size() == 1 ? pooling[0] : pooling[i])
              : processor_->process(prompts[i], std::move(p), rules.empty() ? MaxTokensRule::kClipToContext : rules[i]);
      streams[i] = r.params.output_kind == RequestOutputKind::kDelta;
      r.request_id = id;
      if (!options.rescore_from.empty()) r.rescore_from = options.rescore_from[i];
      results[i].output.prompt_token_ids = r.prompt_token_ids;
      engine.add(std::move(r));
      index.emplace(id, i);
    } catch (const Error& e) {
      results[i].error = std::string("prompt ") + std::to_string(i) + ": " + e.what();
    } catch (const std::bad_alloc&) {
      results[i].error = std::string("prompt ") + std::to_string(i) + ": out of memory while queueing it";
    }
    if (results[i].error) {
      ++at.done;
      if (on_result) on_result(i, results[i]);
    }
  }
  // On a terminal (options.progress_bar): requests done; while prompts are being computed, the
  // prompt tokens done, which the estimate then follows (a long prompt's prefill).
  ProgressBar bar("generate", static_cast<int64_t>(at.total), "requests", stderr_progress_sink(!options.progress_bar));
  int64_t prompt_tokens_total = 0;
  for (const GenerateResult& r : results) prompt_tokens_total += static_cast<int64_t>(r.output.prompt_token_ids.size());
  bool aborted = false;
  while (engine.has_unfinished()) {
    if (options.progress_bar) draw_progress(bar, at, engine, prompt_tokens_total);
    if (!aborted && on_step && !on_step(at)) {
      aborted = true;
      for (const auto& [id, i] : index) engine.abort(id);
    }
    for (RequestOutput& out : engine.step()) {
      const size_t i = index.at(out.request_id);
      if (on_delta) on_delta(i, out);
      if (streams[i]) {
        append_delta(results[i].output, std::move(out));
      } else {
        results[i].output = std::move(out);
      }
      const RequestOutput& whole = results[i].output;
      if (!whole.finished) continue;
      at.prompt_tokens += static_cast<int64_t>(whole.prompt_token_ids.size());
      for (const CompletionOutput& c : whole.outputs) at.output_tokens += static_cast<int64_t>(c.token_ids.size());
      ++at.done;
      if (on_result) on_result(i, results[i]);
      if (!options.return_outputs) {
        std::string id = std::move(results[i].output.request_id);
        results[i].output = RequestOutput{};
        results[i].output.request_id = std::move(id);
      }
    }
  }
  if (on_step) on_step(at);
  bar.finish();
  const LLM::Stats after = engine_stats(engine);
  stats_.steps = after.steps - before.steps;
  stats_.preemptions = after.preemptions - before.preemptions;
  stats_.prefix_query_tokens = after.prefix_query_tokens - before.prefix_query_tokens;
  stats_.prefix_hit_tokens = after.prefix_hit_tokens - before.prefix_hit_tokens;
  stats_.spec_decode_num_drafts = after.spec_decode_num_drafts - before.spec_decode_num_drafts;
  stats_.spec_decode_num_draft_tokens = after.spec_decode_num_draft_tokens - before.spec_decode_num_draft_tokens;
  stats_.spec_decode_num_accepted_tokens =
      after.spec_decode_num_accepted_tokens - before.spec_decode_num_accepted_tokens;
  return results;
}

}  // namespace ditto
