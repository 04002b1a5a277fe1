// A loaded model and everything around it that a front end needs: the weights (CausalLM), the
// tokenizer and chat template, the EOS ids, the front door (InputProcessor) and the engine
// arguments — vLLM's LLMEngine. The server, the CLI and the public `LLM` all hold one; each makes
// its Engines from it, so every request is checked against the same limits. generate() keeps one
// Engine (and so its KV cache and prefix cache) from call to call, as vLLM's LLM keeps its engine.
// Thread-safety: const methods may run on many threads at once; set_engine_args, generate and
// reset_prefix_cache and the weight-update calls are for one thread while no engine made from it
// runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "ditto/engine_args.h"
#include "ditto/llm.h"
#include "engine/engine.h"
#include "engine/input_processor.h"
#include "engine/weight_transfer.h"
#include "model/weight_update.h"

namespace ditto {

class CausalLM;
class ChatTemplate;
class ThreadPool;
class Tokenizer;

class LLMEngine {
 public:
  // Loads the model, tokenizer and chat template (and speculative_config's draft model). Throws
  // Error naming the file or field at fault,
  // Error(kResourceExhausted) when the weights or kv_cache_memory exceed the memory available,
  // Error(kInvalidArgument) for engine arguments out of range (max_model_len above the model's
  // context, kv_cache_memory that holds no block, a negative long_prefill_token_threshold, a
  // speculative_config out of range or whose draft model has another vocabulary).
  explicit LLMEngine(const EngineArgs& args);
  ~LLMEngine();
  LLMEngine(const LLMEngine&) = delete;
  LLMEngine& operator=(const LLMEngine&) = delete;

  // Engine limits for later engines and requests (block_size, kv_cache_memory,
  // max_num_batched_tokens, max_num_seqs, long_prefill_token_threshold, enable_prefix_caching,
  // max_model_len, max_logprobs, speculative_config — a new draft model is loaded here);
  // model and threads stay as loaded. Other values than the current ones drop generate()'s engine
  // (its prefix cache with it): the next generate() makes one with them. Throws as the
  // constructor for bad values.
  void set_engine_args(const EngineArgs& args);
  const EngineArgs& args() const { return args_; }

  const CausalLM& model() const { return *model_; }
  // The draft model last loaded for a speculative_config of method "draft_model" (kept while
  // speculation is off, replaced by another); null if none was.
  const CausalLM* draft_model() const { return draft_.get(); }
  const std::string& model_dir() const { return model_dir_; }
  // OpenAI's system_fingerprint of this engine's bits: the weights, the numerics version and the
  // ISA class ("fp_" + 16 hex digits; engine/system_fingerprint.h), computed once at load, and the
  // seconds that took (one read of the weight files).
  const std::string& system_fingerprint() const { return system_fingerprint_; }
  double fingerprint_seconds() const { return fingerprint_seconds_; }
  // A model directory without tokenizer.json still runs token-id prompts (text and chat prompts
  // and stop strings are then refused at the front door); tokenizer() requires one.
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  const Tokenizer& tokenizer() const;
  const InputProcessor& input_processor() const { return *processor_; }
  // The model's pooling (engine/pooling.h), resolved at load from runner, task, hf_overrides,
  // pooler_config and the checkpoint's files; pooler().pooling is false for a generation model.
  const PoolerConfig& pooler() const { return pooler_; }
  const std::vector<int32_t>& eos_token_ids() const { return eos_token_ids_; }
  // The context every request must fit (args().max_model_len, or the model's).
  int64_t max_model_len() const { return processor_->limits().max_model_len; }

  // A new engine with the current arguments. `logits_hook` is a test double (the invariance
  // harness's negative control); null in real use.
  std::unique_ptr<Engine> make_engine(EngineConfig::LogitsHook logits_hook = nullptr) const;

  // Runs every prompt to its end (the offline API's batch; LLM::generate, whose contract this is)
  // on the engine the last call left idle, whose prefix cache still holds what earlier calls
  // computed (a hit gives the bits a recomputation would: RequestOutput::num_cached_tokens shows
  // it). A new engine is made on the first call, after set_engine_args changed a value, after a
  // call that threw (its engine's state is unknown), and whenever `logits_hook` is set or was set
  // last time. `logits_hook` is a test double (the invariance harness's negative control), never
  // shared with another call; null in real use.
  std::vector<GenerateResult> generate(const std::vector<PromptInput>& prompts,
                                       const std::vector<SamplingParams>& params, const GenerateOptions& options = {},
                                       EngineConfig::LogitsHook logits_hook = nullptr);
  // What the last generate() call did (its own steps and hits, not the engine's totals).
  const LLM::Stats& last_stats() const { return stats_; }

  // Weights updated in place, vLLM's weight-transfer calls (docs/RL.md): start_weight_update(),
  // then update_weights() any number of times with chunks of tensors by Hugging Face name, then
  // finish_weight_update(version). Nothing changes before finish_weight_update, which writes every
  // tensor sent into the packed weights exactly as loading a checkpoint would, so generation then
  // equals, bit for bit, a fresh engine loaded from a checkpoint holding the new tensors; tensors
  // not sent keep their values (a partial update is allowed, as in vLLM). See model/weight_update.h
  // for the checks and the memory (the tensors are borrowed, not copied: their bytes must stay valid
  // until finish_weight_update returns; no byte is allocated for the new weights).
  //
  // start_weight_update: throws Error(kInvalidArgument) while generate() has requests running
  // (called from one of its callbacks: the engine must be idle; the server pauses its own), while an
  // update is already in progress, or for a model loaded from GGUF (updates need a bf16/f16/f32
  // Hugging Face checkpoint). generate() and make_engine() throw
  // Error(kInvalidArgument) between start and finish.
  void start_weight_update();
  // Checks the whole chunk (name, shape, dtype, byte count: WeightUpdate::add) and stages it. A
  // refused chunk throws Error(kInvalidArgument) naming the tensor and what was wrong, and cancels
  // the whole update: nothing of it was applied, the old weights keep serving bit for bit, and the
  // next call must be start_weight_update. Throws Error(kInvalidArgument) without an update in
  // progress.
  void update_weights(std::span<const WeightTensor> tensors);
  // The shm transport (engine/weight_transfer.h): init_weight_transfer_engine names the shared
  // file (init_info {"path": FILE}); update_weights_from_shm maps it and stages update_info's
  // tensors from it, as update_weights does (the mapping is kept until the update finishes or is
  // cancelled). Throw as parse_shm_init_info / parse_weight_update_info / tensors_in_file /
  // update_weights say, and Error(kInvalidArgument) when no shared file was named.
  void init_weight_transfer_engine(const std::string& shm_path);
  void update_weights_from_shm(const WeightUpdateInfo& info);
  // Stages tensors whose bytes the caller hands over in `mapping` (kept until the update finishes
  // or is cancelled): the HTTP transport's spill file.
  void update_weights_mapped(std::span<const WeightTensor> tensors, std::unique_ptr<MappedFile> mapping);
  // Applies the staged tensors, sets weight_version() to `version` (opaque: any string; empty: the
  // number of updates applied so far, "1", "2", ...) and the
  // system_fingerprint to one of the new weights (engine/system_fingerprint.h, hash_weight_update;
  // unchanged when no tensor was sent). KV computed under the old weights is never reused: every
  // engine keys its prefix cache by CausalLM::weights_epoch, and generate()'s engine drops its
  // cached blocks here. Throws Error(kInvalidArgument) without an update in progress.
  void finish_weight_update(const std::string& version);
  // The version the last finish_weight_update set; "0" as loaded.
  const std::string& weight_version() const { return model_->weight_version(); }
  // Drops a started update (its staged tensors and mappings); nothing of it was applied.
  void cancel_weight_update();
  // Sleep level 2 (server/rl_api.h): gives the packed weights' pages back to the OS
  // (drop_weight_pages, model/weight_update.h); until an update of every tensor finishes,
  // weights_dropped() is true and generate() refuses to run. The caller makes sure no forward pass
  // runs meanwhile (the server's engine is paused).
  void drop_weights();
  bool weights_dropped() const { return weights_dropped_; }
  // False for a model loaded from GGUF: its weights cannot be updated (nor dropped by sleep level 2).
  bool weights_updatable() const { return !model_->is_gguf(); }
  // vLLM's sleep(level) / wake_up for generate()'s engine: level 1 gives back the KV cache, the
  // activation buffers and the prefix cache; level 2 also the weights' pages (drop_weights). While
  // asleep generate() refuses to run; wake_up() throws Error(kInvalidArgument) after level 2 until
  // an update of every tensor has finished. Both throw Error(kInvalidArgument) while requests run
  // or an update is in progress; sleep throws it for a level other than 1 or 2.
  void sleep(int level);
  void wake_up();
  bool is_sleeping() const { return sleeping_; }
  // True between start_weight_update and finish_weight_update (or a refused chunk).
  bool weight_update_in_progress() const { return update_ != nullptr; }

  // Empties the prefix cache generate() keeps between calls (vLLM's reset_prefix_cache) and gives
  // the KV pages and activation buffers it held back (Engine::release_idle_memory); the next call
  // recomputes every prompt. Returns false, dropping nothing, while a generate() call has requests
  // running (called from one of its callbacks); true otherwise (also when there is no cache yet).
  bool reset_prefix_cache();

 private:
  EngineConfig engine_config() const;
  // generate()'s batch on engine_ (checked already), to the end.
  std::vector<GenerateResult> run(const std::vector<PromptInput>& prompts, const std::vector<SamplingParams>& params,
                                  const GenerateOptions& options);

  EngineArgs args_;
  std::string model_dir_;
  std::string system_fingerprint_;
  uint64_t weights_hash_ = 0;             // what system_fingerprint_ is made of (hash_weight_files, hash_weight_update)
  std::unique_ptr<WeightUpdate> update_;  // the update in progress, or null
  std::vector<std::unique_ptr<MappedFile>> update_mappings_;  // the bytes update_ borrows
  std::string shm_path_;                                      // init_weight_transfer_engine's file
  bool weights_dropped_ = false;                              // drop_weights, until a full update
  bool sleeping_ = false;                                     // sleep() .. wake_up()
  double fingerprint_seconds_ = 0.0;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CausalLM> model_;
  std::unique_ptr<CausalLM> draft_;  // speculative_config's draft model, when it has one
  std::string draft_dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;  // null when the model has none
  std::unique_ptr<InputProcessor> processor_;
  PoolerConfig pooler_;
  std::vector<int32_t> eos_token_ids_;
  LLM::Stats stats_;
  // generate()'s engine, idle between calls; null until the first call and after set_engine_args
  // changed a value. Declared last: it refers to the model, draft model and tokenizer above.
  std::unique_ptr<Engine> engine_;
  bool engine_has_hook_ = false;  // engine_ was made with a logits hook: never reused
};

}  // namespace ditto
