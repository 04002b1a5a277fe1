#include "ditto/llm.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"
#include "engine/beam_search.h"
#include "engine/llm_engine.h"
#include "engine/pooling.h"
#include "model/causal_lm.h"
#include "parallel/tensor_parallel.h"

namespace ditto {

namespace {

ModelInfo describe(const LLMEngine& engine) {
  const InputProcessor& door = engine.input_processor();
  const LoadStats& load = engine.model().load_stats();
  return ModelInfo{.model_dir = engine.model_dir(),
                   .vocab_size = door.limits().vocab_size,
                   .max_model_len = engine.max_model_len(),
                   .has_tokenizer = engine.has_tokenizer(),
                   .eos_token_ids = engine.eos_token_ids(),
                   .bos_token_id = engine.has_tokenizer() ? door.bos_token_id() : std::nullopt,
                   .num_tensors = load.num_tensors,
                   .weight_bytes = load.weight_bytes,
                   .load_seconds = load.seconds,
                   .system_fingerprint = engine.system_fingerprint(),
                   .runner = engine.pooler().pooling ? "pooling" : "generate",
                   .pooling_task = engine.pooler().pooling ? pooling_task_name(engine.pooler().task) : "",
                   .pooling_type = engine.pooler().pooling ? pooling_type_name(engine.pooler().pooling_type) : "",
                   .hidden_size = engine.model().config().hidden_size};
}

// Scoring's engine steps hold at most this many tokens' logits (kScoreRowsPerStep · vocab floats)
// however long the sequences are. Chunked prefill cannot change a bit: a memory choice only.
constexpr int64_t kScoreRowsPerStep = 256;

}  // namespace

LLM::LLM(const EngineArgs& args) : engine_(std::make_unique<LLMEngine>(args)), info_(describe(*engine_)) {}

LLM::~LLM() = default;

std::vector<GenerateResult> LLM::generate(const std::vector<PromptInput>& prompts,
                                          const std::vector<SamplingParams>& params, const GenerateOptions& options) {
  return engine_->generate(prompts, params, options);
}

std::vector<GenerateResult> LLM::generate(const std::vector<PromptInput>& prompts,
                                          const std::vector<SamplingParams>& params, bool progress,
                                          const ResultFn& on_result) {
  GenerateOptions options;
  options.progress_bar = progress;
  options.on_result = on_result;
  return engine_->generate(prompts, params, options);
}

std::vector<PoolingResult> LLM::encode(const std::vector<PromptInput>& prompts,
                                       const std::vector<PoolingParams>& params, bool progress) {
  if (!engine_->pooler().pooling)
    throw_invalid_field("model", info_.model_dir +
                                     " runs generation: load it with runner \"pooling\" (or task \"embed\" / "
                                     "\"score\") for encode, embed and score");
  if (params.size() != 1 && params.size() != prompts.size())
    throw_invalid_argument("encode: " + std::to_string(params.size()) + " PoolingParams for " +
                           std::to_string(prompts.size()) + " prompts (give one, or one per prompt)");
  GenerateOptions options;
  options.pooling = params;
  options.progress_bar = progress;
  std::vector<PoolingResult> results;
  results.reserve(prompts.size());
  for (GenerateResult& g : engine_->generate(prompts, {SamplingParams{}}, options)) {
    PoolingResult& r = results.emplace_back();
    r.error = std::move(g.error);
    r.output.request_id = std::move(g.output.request_id);
    r.output.prompt = std::move(g.output.prompt);
    r.output.prompt_token_ids = std::move(g.output.prompt_token_ids);
    r.output.data = std::move(g.output.pooled);
    r.output.num_cached_tokens = g.output.num_cached_tokens;
  }
  return results;
}

std::vector<PoolingResult> LLM::embed(const std::vector<PromptInput>& prompts, const PoolingParams& params) {
  PoolingParams p = params;
  if (p.task.empty()) p.task = "embed";
  return encode(prompts, {p});
}

std::vector<PoolingResult> LLM::score(const std::vector<std::string>& text_1, const std::vector<std::string>& text_2,
                                      const PoolingParams& params, const std::string& chat_template_kwargs) {
  if (text_1.size() != 1 && text_1.size() != text_2.size())
    throw_invalid_field("text_1", "score: " + std::to_string(text_1.size()) + " text_1 for " +
                                      std::to_string(text_2.size()) + " text_2 (give one, or one per text_2)");
  const ScorePlan plan = plan_scores(engine_->pooler(), text_1, text_2, chat_template_kwargs);
  PoolingParams p = params;
  if (p.task.empty() || p.task == "score") p.task = plan.task;  // an embedding model's pair: two embeddings
  std::vector<PoolingResult> pooled = encode(plan.prompts, {p});
  if (plan.task == "score") return pooled;  // one per pair
  std::vector<PoolingResult> results(text_2.size());
  for (size_t i = 0; i < text_2.size(); ++i) {
    const PoolingResult& a = pooled[plan.pairs[i].first];
    const PoolingResult& b = pooled[plan.pairs[i].second];
    results[i].output.request_id = std::to_string(i);
    if (a.error || b.error) {
      results[i].error = "pair " + std::to_string(i) + ": " + (a.error ? *a.error : *b.error);
      continue;
    }
    results[i].output.data = {plan.score(a.output.data, b.output.data)};
  }
  return results;
}

std::vector<RequestOutput> LLM::generate(const std::vector<std::string>& prompts, const SamplingParams& params) {
  std::vector<PromptInput> inputs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) inputs[i].text = prompts[i];
  std::vector<RequestOutput> out;
  for (GenerateResult& r : engine_->generate(inputs, {params})) {
    if (r.error) throw Error(ErrorCode::kInvalidArgument, *r.error);
    out.push_back(std::move(r.output));
  }
  return out;
}

std::vector<GenerateResult> LLM::generate_stream(const std::vector<PromptInput>& prompts,
                                                 const std::vector<SamplingParams>& params, const DeltaFn& on_delta) {
  GenerateOptions options;
  options.on_delta = on_delta;
  return engine_->generate(prompts, params, options);
}

std::vector<int32_t> LLM::tokenize(const PromptInput& prompt) const {
  return engine_->input_processor().encode(prompt).first;
}

std::string LLM::render_chat(const PromptInput& chat) const {
  if (!chat.messages) throw_invalid_field("messages", "render_chat: the prompt has no messages");
  return engine_->input_processor().encode(chat).second;
}

std::string LLM::detokenize(const std::vector<int32_t>& token_ids, bool skip_special_tokens) const {
  return engine_->input_processor().decode(token_ids, skip_special_tokens);
}

std::optional<std::string> LLM::id_to_token(int32_t id) const {
  if (!info_.has_tokenizer) return std::nullopt;
  return engine_->input_processor().id_to_token(id);
}

std::optional<int32_t> LLM::token_to_id(const std::string& token) const {
  if (!info_.has_tokenizer) return std::nullopt;
  return engine_->input_processor().token_to_id(token);
}

std::string LLM::tokenizer_config_json() const {
  return info_.has_tokenizer ? engine_->input_processor().tokenizer_config().dump() : "{}";
}

void LLM::score(const std::vector<std::vector<int32_t>>& sequences, const ScoreOptions& options,
                const ScoreFn& on_scored) {
  const int64_t vocab = info_.vocab_size;
  if (options.top_logprobs != -1 && (options.top_logprobs < 1 || options.top_logprobs > vocab))
    throw_invalid_field("top_logprobs", "score: top_logprobs must be -1 (the whole vocabulary) or in [1, " +
                                            std::to_string(vocab) + "] (vocab_size), got " +
                                            std::to_string(options.top_logprobs));
  const bool full_rows = options.top_logprobs == -1;
  const int64_t top = full_rows ? vocab : options.top_logprobs;
  // Scoring takes one position past each sequence (its request asks for the token after the
  // last): said here in those terms, where the front door would say "leaves no room for output".
  const int64_t context = info_.max_model_len;
  const std::string context_name = context == engine_->model().config().max_position_embeddings
                                       ? "the model's context (max_position_embeddings = "
                                       : "the context (max_model_len = ";
  for (size_t i = 0; i < sequences.size(); ++i) {
    const auto n = static_cast<int64_t>(sequences[i].size());
    const std::string name = "sequence " + std::to_string(i);
    if (n < (options.next_token ? 1 : 2))
      throw_invalid_argument(name + " has " + std::to_string(n) + " token" + (n == 1 ? "" : "s") +
                             ": scoring needs at least two (the first has no context)");
    if (n >= context)
      throw_invalid_argument(name + " has " + std::to_string(n) + " tokens: scoring takes positions 0 to " +
                             std::to_string(n) + " and position " + std::to_string(context) + " is past " +
                             context_name + std::to_string(context) + "); give at most " + std::to_string(context - 1) +
                             " tokens");
  }
  // The engine's limits for this call: short steps, and whole rows one sequence at a time.
  const EngineArgs saved = engine_->args();
  EngineArgs args = saved;
  args.max_num_batched_tokens = std::min(args.max_num_batched_tokens, kScoreRowsPerStep);
  args.max_logprobs = std::max(args.max_logprobs, top);
  if (full_rows) args.max_num_seqs = 1;
  engine_->set_engine_args(args);
  struct Restore {
    LLMEngine& engine;
    const EngineArgs& args;
    ~Restore() { engine.set_engine_args(args); }
  } restore{*engine_, saved};

  SamplingParams params;
  params.temperature = 0.0f;
  params.max_tokens = 1;
  params.ignore_eos = true;
  params.prompt_logprobs = top;
  if (options.next_token) params.logprobs = top;
  std::vector<PromptInput> prompts;
  prompts.reserve(sequences.size());
  for (const std::vector<int32_t>& ids : sequences) prompts.push_back(PromptInput{.token_ids = ids});
  // Every sequence through the front door before any step: a bad one stops the call before any
  // output. Outputs then go out in sequence order as soon as every earlier one has come; with one
  // sequence at a time (whole rows), only the running one's rows are held.
  std::optional<Error> refused;
  std::map<size_t, RequestOutput> finished;
  size_t next = 0;
  GenerateOptions run;
  run.max_tokens_rules.assign(prompts.size(), MaxTokensRule::kAsGiven);
  run.return_outputs = false;
  run.on_result = [&](size_t i, GenerateResult& r) {
    if (r.error && !refused) {
      // "prompt I: why" → "sequence I: why"
      const std::string why = r.error->substr(std::min(r.error->find(": ") + 2, r.error->size()));
      refused.emplace(ErrorCode::kInvalidArgument, "sequence " + std::to_string(i) + ": " + why);
    }
    if (refused) return;  // the others are aborted, unreported
    finished.emplace(i, std::move(r.output));
    for (auto it = finished.find(next); it != finished.end(); it = finished.find(++next)) {
      on_scored(next, std::move(it->second));
      finished.erase(it);
    }
  };
  run.on_step = [&](const GenerateProgress&) { return !refused; };
  engine_->generate(prompts, {params}, run);
  if (refused) throw *refused;
}

std::vector<BeamSearchOutput> LLM::beam_search(const std::vector<PromptInput>& prompts, const BeamSearchParams& params,
                                               uint64_t seed) {
  params.validate(engine_->args().max_logprobs);
  const InputProcessor& door = engine_->input_processor();
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      ids.push_back(door.encode(prompts[i]).first);
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, "prompt " + std::to_string(i) + ": " + e.what(), e.param());
    }
    if (ids.back().empty()) throw_invalid_argument("prompt " + std::to_string(i) + ": the prompt is empty");
  }
  std::vector<BeamSearchOutput> outputs = beam_search_on(*engine_, ids, params, seed);
  if (info_.has_tokenizer)
    for (BeamSearchOutput& o : outputs)
      for (BeamSearchSequence& s : o.sequences) s.text = door.decode(s.tokens, /*skip_special_tokens=*/false);
  return outputs;
}

bool LLM::reset_prefix_cache() { return engine_->reset_prefix_cache(); }

void LLM::start_weight_update() { engine_->start_weight_update(); }

void LLM::update_weights(const std::vector<WeightTensor>& tensors) { engine_->update_weights(tensors); }

void LLM::init_weight_transfer_engine(const std::string& init_info_json) {
  engine_->init_weight_transfer_engine(
      parse_shm_init_info(parse_json_input<nlohmann::ordered_json>(init_info_json, "init_info")));
}

void LLM::update_weights(const std::string& update_info_json) {
  engine_->update_weights_from_shm(parse_weight_update_info(
      parse_json_input<nlohmann::ordered_json>(update_info_json, "update_info"), /*need_offsets=*/true));
}

void LLM::finish_weight_update(const std::string& weight_version) {
  engine_->finish_weight_update(weight_version);
  info_.system_fingerprint = engine_->system_fingerprint();
}

void LLM::cancel_weight_update() { engine_->cancel_weight_update(); }

const std::string& LLM::weight_version() const { return engine_->weight_version(); }

void LLM::sleep(int level) { engine_->sleep(level); }

void LLM::wake_up() { engine_->wake_up(); }

bool LLM::is_sleeping() const { return engine_->is_sleeping(); }

const GenerationDefaults& LLM::generation_defaults() const { return engine_->input_processor().generation_defaults(); }

const ModelInfo& LLM::model_info() const { return info_; }

const LLM::Stats& LLM::last_stats() const { return engine_->last_stats(); }

const EngineArgs& LLM::args() const { return engine_->args(); }

void shutdown_tensor_parallel() { TensorParallelGroup::shutdown(); }

}  // namespace ditto
