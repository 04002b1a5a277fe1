#include "engine/engine.h"

#include <algorithm>
#include <future>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "core/step_profile.h"

namespace ditto {

struct Engine::Request {
  std::string request_id;
  SamplingParams params;        // seed set (the front door draws one when none was given)
  std::vector<Sequence*> seqs;  // by choice
  int64_t rescore_from = -1;    // EngineRequest::rescore_from
  // A pooling request (EngineRequest::pooling): its one sequence's rows as they come, in position
  // order — MEAN: their sum; CLS, LAST: the row itself.
  std::optional<PoolingSpec> pooling;
  std::vector<double> pooled_sum;  // [hidden_size] f64
  std::vector<float> pooled_row;   // [hidden_size] f32
  // Structured outputs: the compiled constraint and each choice's matcher (by choice), whose state
  // is the choice's output tokens so far.
  std::shared_ptr<const StructuredOutputGrammar> grammar;
  std::vector<std::unique_ptr<GrammarMatcher>> matchers;
  // Re-scoring a constrained output (rescore_from ≥ 0): a matcher over the re-scored tokens, at
  // prompt position rescore_position, so each row is scored under the mask it was sampled with.
  std::unique_ptr<GrammarMatcher> rescore_matcher;
  int64_t rescore_position = 0;
  std::vector<uint32_t> rescore_mask;
};

int64_t kv_blocks_for_memory(const ModelConfig& c, int64_t block_size, int64_t bytes) {
  const int64_t per_block = c.num_hidden_layers * 2 * block_size * c.num_key_value_heads * c.head_dim * 2;
  return per_block > 0 ? bytes / per_block : 0;
}

InputLimits input_limits_for(const ModelConfig& c, const EngineConfig& config) {
  InputLimits l;
  l.vocab_size = c.vocab_size;
  l.max_model_len = config.max_model_len > 0 ? config.max_model_len : c.max_position_embeddings;
  l.max_model_len_is_model_limit = l.max_model_len == c.max_position_embeddings;
  l.max_logprobs = config.max_logprobs;
  l.block_size = config.block_size;
  l.num_kv_blocks = config.num_kv_blocks;
  return l;
}

Engine::Engine(const CausalLM& model, const Tokenizer* tokenizer, std::vector<int32_t> eos_token_ids,
               const EngineConfig& config)
    : model_(model),
      eos_token_ids_(std::move(eos_token_ids)),
      config_(config),
      processor_(input_limits_for(model.config(), config), tokenizer, /*chat_template=*/nullptr, {}, {},
                 eos_token_ids_),
      output_(tokenizer),
      kv_(config.num_kv_blocks, config.block_size, config.enable_prefix_caching),
      runner_(model, config.num_kv_blocks, config.block_size, config.enable_return_routed_experts),
      scheduler_(config.scheduler, kv_) {
  if (config.proposer) {
    if (config.speculative.num_speculative_tokens < 1)
      throw_invalid_argument("speculative_config: num_speculative_tokens must be at least 1 with a proposer");
    proposer_ = config.proposer;
    return;
  }
  config_.speculative = checked_speculative_config(config.speculative);
  if (config_.speculative.method == "draft_model" && config.draft_model != nullptr &&
      config.draft_model->config().vocab_size != model.config().vocab_size)
    throw_invalid_argument("speculative_config: the draft model's vocab_size " +
                           std::to_string(config.draft_model->config().vocab_size) + " differs from the model's " +
                           std::to_string(model.config().vocab_size) + " (a draft needs the same tokenizer)");
  proposer_ = make_proposer(config_.speculative, config.draft_model, config.num_kv_blocks, config.block_size,
                            config.scheduler.max_num_batched_tokens);
}

Engine::~Engine() = default;

void Engine::add_request(const std::string& request_id, std::vector<int32_t> prompt_token_ids,
                         const SamplingParams& params, const std::string& prompt_text) {
  EngineRequest r =
      processor_.process(PromptInput{.token_ids = std::move(prompt_token_ids)}, params, MaxTokensRule::kClipToContext);
  r.request_id = request_id;
  r.prompt = prompt_text;
  add(std::move(r));
}

void Engine::add(EngineRequest r) {
  if (request_index_.contains(r.request_id))
    throw_invalid_argument("request_id '" + r.request_id + "' is already running");
  const SamplingParams& params = r.params;
  const auto prompt_len = static_cast<int64_t>(r.prompt_token_ids.size());
  DITTO_CHECK(prompt_len > 0 &&
              (prompt_len + params.max_tokens + config_.block_size - 1) / config_.block_size <= config_.num_kv_blocks)
      << "request '" << r.request_id << "' did not come through the front door";
  const std::vector<int32_t>& prompt_token_ids = r.prompt_token_ids;
  const std::string& request_id = r.request_id;
  auto req = std::make_unique<Request>();
  req->request_id = request_id;
  req->params = params;
  req->rescore_from = r.rescore_from;
  req->pooling = r.pooling;
  DITTO_CHECK(!params.structured_outputs || r.grammar) << "structured outputs not compiled at the front door";
  req->grammar = r.grammar;
  if (req->grammar) {
    for (int64_t i = 0; i < params.n; ++i) req->matchers.push_back(req->grammar->new_matcher());
    if (r.rescore_from >= 0) {
      req->rescore_matcher = req->grammar->new_matcher();
      req->rescore_position = r.rescore_from;
      req->rescore_mask.assign(req->grammar->vocabulary().mask_words(), 0u);
    }
  }
  DITTO_CHECK(!r.pooling || params.n == 1) << "a pooling request has one sequence";
  const int64_t index = next_request_++;
  output_.set_weight_version(model_.weight_version());
  output_.add(index, r);
  for (int64_t i = 0; i < params.n; ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_sequence_++;
    seq->request = index;
    seq->choice = i;
    seq->arrival = next_arrival_++;
    seq->token_ids = prompt_token_ids;
    seq->num_prompt_tokens = prompt_len;
    // Prompt logprobs, MEAN and CLS pooling need every prompt row computed (no prefix-cache hits).
    seq->use_prefix_cache = !(params.prompt_logprobs && i == 0) && !(r.pooling && r.pooling->needs_every_row());
    if (params.cache_salt) seq->prefix_root = KvCacheManager::salt_root(*params.cache_salt);
    req->seqs.push_back(seq.get());
    scheduler_.add(seq.get());
    sequences_.emplace(seq->id, std::move(seq));
  }
  request_index_.emplace(request_id, index);
  requests_.emplace(index, std::move(req));
  ++num_unfinished_;
}

int64_t Engine::release_idle_memory(bool drop_prefix_cache) {
  model_.release_activations();
  if (drop_prefix_cache) kv_.reset_prefix_cache();
  return runner_.kv_cache().release_blocks(kv_.free_uncached_blocks());
}

void Engine::abort(const std::string& request_id) {
  const auto found = request_index_.find(request_id);
  if (found == request_index_.end()) return;
  if (output_.finished(found->second)) return;
  for (Sequence* seq : requests_.at(found->second)->seqs)
    if (!seq->finished()) finish_sequence(*seq, FinishReason::kAbort);
  aborted_.push_back(found->second);
}

void Engine::finish_sequence(Sequence& seq, FinishReason reason, std::optional<int32_t> stop_token_id,
                             std::optional<std::string> message) {
  seq.finish = reason;
  seq.proposal.clear();
  // The rows of the tokens that ran (all but the last sampled one), read before the blocks go.
  if (const RoutedExpertsStore* routed = runner_.routed_experts();
      routed != nullptr && !requests_.at(seq.request)->pooling)
    output_.set_routed_experts(
        seq.request, seq.choice,
        routed->read(kv_.block_table(seq.id), config_.block_size,
                     std::min<int64_t>(seq.num_computed_tokens, static_cast<int64_t>(seq.token_ids.size()) - 1)));
  scheduler_.remove(&seq);
  if (proposer_) proposer_->release(seq.id);
  output_.finish(seq.request, seq.choice, reason, stop_token_id, std::move(message));
}

void Engine::process_row(Sequence& seq, const float* logits, std::span<const uint32_t> grammar_mask) {
  Request& req = *requests_.at(seq.request);
  const SamplingParams& p = req.params;
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  SamplerInput in;
  in.logits = std::span<const float>(logits, vocab);
  in.prompt_token_ids = std::span<const int32_t>(seq.token_ids.data(), static_cast<size_t>(seq.num_prompt_tokens));
  in.output_token_ids = std::span<const int32_t>(seq.token_ids.data() + seq.num_prompt_tokens,
                                                 static_cast<size_t>(seq.num_output_tokens()));
  in.eos_token_ids = eos_token_ids_;
  in.seed = *p.seed;
  in.choice = seq.choice;
  in.logprobs_mode = config_.logprobs_mode;
  in.grammar_mask = grammar_mask;
  SampledToken s = sampler_.sample(in, p);
  const int32_t token = s.token.token_id;
  GrammarMatcher* matcher = req.grammar ? req.matchers[static_cast<size_t>(seq.choice)].get() : nullptr;
  DITTO_CHECK(matcher == nullptr || !grammar_mask.empty()) << "a constrained row sampled without its mask";
  // A token the constraint refuses was drawn only because the other masks left none it allows.
  if (matcher != nullptr && !matcher->accept(token))
    return finish_sequence(seq, FinishReason::kError, std::nullopt, "structured output: " + grammar_failure(*matcher));
  const int64_t position = seq.num_output_tokens();
  seq.token_ids.push_back(token);
  if (output_.append_token(seq.request, seq.choice, position, std::move(s)))
    return finish_sequence(seq, FinishReason::kStop);  // a stop string
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end())
    return finish_sequence(seq, FinishReason::kStop, token);
  if (!p.ignore_eos && std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end())
    return finish_sequence(seq, FinishReason::kStop);
  if (matcher != nullptr && matcher->is_stopped()) return finish_sequence(seq, FinishReason::kStop);
  if (seq.num_output_tokens() >= p.max_tokens ||
      static_cast<int64_t>(seq.token_ids.size()) >= processor_.limits().max_model_len)
    return finish_sequence(seq, FinishReason::kLength);
}

// The grammar engine's reason in a few lines (llguidance appends its parser state to the first).
std::string Engine::grammar_failure(const GrammarMatcher& m) {
  std::string e = m.error();
  if (const size_t cut = e.find('\n'); cut != std::string::npos) e.resize(cut);
  return e.empty() ? "no token the constraint allows is left by the request's other masks (allowed_token_ids, "
                     "bad_words, min_tokens, logit_bias)"
                   : e;
}

// For each scheduled sequence that samples in this step and has a constraint: the mask of each row
// it samples. Row 0's is the matcher's as the previous step left it; with guesses, row j's is
// computed after consuming guesses 0..j-1, which are then rolled back — so every row's mask is the
// one plain decoding would see had the guesses been its tokens.
void Engine::compute_grammar_masks(const std::vector<ScheduledSequence>& batch) {
  for (size_t i = 0; i < batch.size(); ++i) {
    const Sequence& seq = *batch[i].seq;
    const Request& req = *requests_.at(seq.request);
    std::vector<uint32_t>& masks = grammar_masks_[i];
    masks.clear();
    const bool samples = seq.num_computed_tokens + batch[i].num_tokens == static_cast<int64_t>(seq.token_ids.size());
    if (!req.grammar || seq.finished() || !samples) continue;
    GrammarMatcher& m = *req.matchers[static_cast<size_t>(seq.choice)];
    const size_t words = req.grammar->vocabulary().mask_words();
    const int64_t rows = 1 + batch[i].num_proposals;
    masks.assign(static_cast<size_t>(rows) * words, 0u);
    int64_t consumed = 0;
    for (int64_t j = 0; j < rows; ++j) {
      if (!m.fill_mask(std::span<uint32_t>(masks).subspan(static_cast<size_t>(j) * words, words))) break;
      if (j + 1 < rows) {
        if (!m.accept(seq.proposal[static_cast<size_t>(j)])) break;
        ++consumed;
      }
    }
    DITTO_CHECK(m.rollback(consumed)) << "the grammar engine could not roll back " << consumed << " guesses";
  }
}

std::vector<RequestOutput> Engine::step() {
  std::vector<int64_t> touched = std::move(aborted_);  // requests to report on
  aborted_.clear();
  last_step_tokens_.clear();
  last_step_scheduled_.clear();
  // A weight update (model/weight_update.h) may have landed since the last step.
  scheduler_.set_weights_epoch(model_.weights_epoch());
  output_.set_weight_version(model_.weight_version());
  if (proposer_) propose();
  std::optional<PhaseTimer> schedule_timer(std::in_place, StepPhase::kSchedule);
  const std::vector<ScheduledSequence> batch = scheduler_.schedule();
  // Every queued request fits the cache alone, so an idle step with work waiting is a bug; fail
  // loudly rather than let a caller's `while (has_unfinished()) step();` spin forever.
  DITTO_CHECK(!batch.empty() || !touched.empty() || scheduler_.num_waiting() + scheduler_.num_running() == 0)
      << "scheduler made no progress with " << scheduler_.num_waiting() << " waiting sequences";
  if (!batch.empty()) {
    const std::vector<SequenceStep> steps = prepare_inputs(batch);
    schedule_timer.reset();
    // Structured-output masks depend only on state the previous step fixed, so they are computed on
    // another thread while the forward pass runs.
    grammar_masks_.assign(batch.size(), {});
    const bool constrained = std::any_of(batch.begin(), batch.end(), [&](const ScheduledSequence& s) {
      return requests_.at(s.seq->request)->grammar != nullptr;
    });
    std::future<void> masks;
    if (constrained) masks = std::async(std::launch::async, [&] { compute_grammar_masks(batch); });
    StepOutputs out = runner_.step(steps);
    if (masks.valid()) masks.get();
    ++num_steps_;
    const PhaseTimer sampler_timer(StepPhase::kSampler);
    apply_logits_hook(out.logits, batch.size());
    process_outputs(batch, steps, out, touched);
  }
  schedule_timer.reset();
  for (Sequence* seq : scheduler_.running()) seq->proposal.clear();  // guesses are for one step
  const PhaseTimer outputs_timer(StepPhase::kSampler);
  return report(std::move(touched));
}

// Guesses for the running decodes, as many as the speculation policy asks for each
// (guesses_to_ask, speculative.h).
void Engine::propose() {
  const SpeculativeConfig& sc = config_.speculative;
  if (sc.disable_by_batch_size > 0 && scheduler_.num_running() >= sc.disable_by_batch_size) return;
  std::vector<ProposalRequest> wanted;
  for (Sequence* seq : scheduler_.running()) {
    if (seq->finished() || seq->num_uncomputed_tokens() != 1) continue;
    const SamplingParams& p = requests_.at(seq->request)->params;
    const int64_t room = std::min(p.max_tokens - seq->num_output_tokens(),
                                  processor_.limits().max_model_len - static_cast<int64_t>(seq->token_ids.size())) -
                         1;  // the token sampled after the last guess must fit too
    if (const int64_t n = guesses_to_ask(*seq, room, sc.num_speculative_tokens); n >= 1) wanted.push_back({seq, n});
  }
  if (wanted.empty()) return;
  std::vector<std::vector<int32_t>> proposals;
  proposer_->propose(wanted, proposals);
  const int32_t vocab = static_cast<int32_t>(model_.config().vocab_size);
  for (size_t i = 0; i < wanted.size(); ++i) {
    std::vector<int32_t>& guess = proposals[i];
    DITTO_CHECK(static_cast<int64_t>(guess.size()) <= wanted[i].max_tokens &&
                std::all_of(guess.begin(), guess.end(), [&](int32_t t) { return t >= 0 && t < vocab; }))
        << "the proposer returned " << guess.size() << " guesses (at most " << wanted[i].max_tokens
        << " asked), or one outside the vocabulary";
    // A constrained sequence keeps only the guesses its constraint allows (no row is spent on one
    // that could never be sampled).
    const Request& req = *requests_.at(wanted[i].seq->request);
    if (req.grammar)
      guess.resize(static_cast<size_t>(req.matchers[static_cast<size_t>(wanted[i].seq->choice)]->valid_prefix(guess)));
    const_cast<Sequence*>(wanted[i].seq)->proposal = std::move(guess);
  }
}

// One SequenceStep per scheduled sequence: the tokens it runs now, from its first uncomputed one
// (for a decode with guesses: its last token, then the guesses).
std::vector<SequenceStep> Engine::prepare_inputs(const std::vector<ScheduledSequence>& batch) {
  std::vector<SequenceStep> steps;
  steps.reserve(batch.size());
  verify_tokens_.clear();
  verify_tokens_.reserve(batch.size());  // no reallocation: the steps' spans point into it
  for (const ScheduledSequence& s : batch) {
    const Request& req = *requests_.at(s.seq->request);
    SequenceStep step;
    step.token_ids = std::span<const int32_t>(s.seq->token_ids.data() + s.seq->num_computed_tokens,
                                              static_cast<size_t>(s.num_tokens));
    if (s.num_proposals > 0) {
      std::vector<int32_t>& run = verify_tokens_.emplace_back(step.token_ids.begin(), step.token_ids.end());
      run.insert(run.end(), s.seq->proposal.begin(), s.seq->proposal.begin() + s.num_proposals);
      step.token_ids = run;
      step.all_logits = true;
    }
    step.start_position = static_cast<int32_t>(s.seq->num_computed_tokens);
    if (s.seq->choice == 0) output_.set_num_cached_tokens(s.seq->request, s.seq->num_cached_tokens);
    step.block_table = kv_.block_table(s.seq->id);  // stable: nothing allocates until the step ends
    // Prompt logprobs need every prompt row's logits (choice 0 computes them for the request).
    step.all_logits = step.all_logits || (req.params.prompt_logprobs && s.seq->choice == 0 &&
                                          s.seq->num_computed_tokens < s.seq->num_prompt_tokens);
    if (req.pooling) pooling_rows(*req.pooling, *s.seq, s.num_tokens, step);
    steps.push_back(step);
  }
  return steps;
}

void Engine::apply_logits_hook(std::vector<float>& logits, size_t batch_sequences) const {
  if (!config_.logits_hook) return;
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  for (size_t r = 0; r * vocab < logits.size(); ++r)
    config_.logits_hook(logits.data() + r * vocab, model_.config().vocab_size, static_cast<int64_t>(batch_sequences));
}

// Advances every scheduled sequence past the tokens it ran, records prompt logprobs and, for a
// sequence whose tokens are all computed, samples its next token.
void Engine::process_outputs(const std::vector<ScheduledSequence>& batch, const std::vector<SequenceStep>& steps,
                             const StepOutputs& out, std::vector<int64_t>& touched) {
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  const auto hidden_size = static_cast<size_t>(model_.config().hidden_size);
  const std::vector<float>& logits = out.logits;
  size_t row = 0;
  size_t hidden_row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Sequence& seq = *batch[i].seq;
    Request& req = *requests_.at(seq.request);
    if (std::none_of(last_step_scheduled_.begin(), last_step_scheduled_.end(),
                     [&](const auto& e) { return e.first == req.request_id; })) {
      int64_t preemptions = 0;
      for (const Sequence* s : req.seqs) preemptions += s->num_preemptions;
      last_step_scheduled_.emplace_back(req.request_id, preemptions);
    }
    const int64_t num_tokens = batch[i].num_tokens + batch[i].num_proposals;
    const int64_t rows = !steps[i].logits ? 0 : steps[i].all_logits ? num_tokens : 1;
    if (req.pooling) {
      const HiddenRows h = steps[i].hidden;
      const size_t n = h == HiddenRows::kNone ? 0 : h == HiddenRows::kAll ? static_cast<size_t>(num_tokens) : 1;
      if (seq.num_computed_tokens == 0) {  // the first step, or a recomputation after preemption
        req.pooled_sum.clear();
        req.pooled_row.clear();
      }
      seq.num_computed_tokens += batch[i].num_tokens;
      kv_.cache_computed(seq.id, seq.token_ids, seq.num_computed_tokens);
      pool(seq, req, std::span<const float>(out.hidden).subspan(hidden_row * hidden_size, n * hidden_size),
           rows > 0 ? logits.data() + row * vocab : nullptr);
      hidden_row += n;
      row += static_cast<size_t>(rows);
      touched.push_back(seq.request);
      continue;
    }
    if (steps[i].all_logits && batch[i].num_proposals == 0)
      record_prompt_logprobs(seq, req, logits.data() + row * vocab, rows);
    seq.num_computed_tokens += batch[i].num_tokens;
    kv_.cache_computed(seq.id, seq.token_ids, seq.num_computed_tokens);
    int64_t sampled = 0;
    if (batch[i].num_proposals > 0 && !seq.finished()) {
      sampled = verify(seq, logits.data() + row * vocab, batch[i].num_proposals, grammar_masks_[i]);
    } else if (seq.num_uncomputed_tokens() == 0 && !seq.finished()) {
      process_row(seq, logits.data() + (row + static_cast<size_t>(rows - 1)) * vocab, grammar_masks_[i]);
      sampled = 1;
    }
    if (sampled > 0) {
      auto counted = std::find_if(last_step_tokens_.begin(), last_step_tokens_.end(),
                                  [&](const auto& e) { return e.first == req.request_id; });
      if (counted == last_step_tokens_.end()) counted = last_step_tokens_.emplace(counted, req.request_id, 0);
      counted->second += sampled;
    }
    row += static_cast<size_t>(rows);
    touched.push_back(seq.request);
  }
}

// Row j of `logits` ([1 + num_proposals, vocab_size] f32) is the model's distribution after the
// last token and guesses 0..j-1: exactly what plain decoding would see at that point if the
// guesses were its tokens (the forward pass is chunk-invariant). So sampling row j as plain
// decoding would — process_row, whose random draw depends on (seed, choice, output position)
// only — gives plain decoding's token as long as every earlier guess equalled the sampled token;
// the first guess that differs is dropped with the rest, and the sampled token stands in for it.
// The K/V of dropped guesses stay in blocks past num_computed_tokens, where the next step
// overwrites them; no prefix-cache block holds them (cache_computed stops at num_computed_tokens).
int64_t Engine::verify(Sequence& seq, const float* logits, int64_t num_proposals,
                       std::span<const uint32_t> grammar_masks) {
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  const size_t words = grammar_masks.size() / static_cast<size_t>(1 + num_proposals);
  const std::vector<int32_t> guesses(seq.proposal.begin(), seq.proposal.begin() + num_proposals);
  int64_t sampled = 0;
  int64_t accepted = 0;
  for (int64_t j = 0; j <= num_proposals; ++j) {
    process_row(seq, logits + static_cast<size_t>(j) * vocab,
                grammar_masks.empty() ? grammar_masks : grammar_masks.subspan(static_cast<size_t>(j) * words, words));
    ++sampled;
    if (seq.finish == FinishReason::kError) break;  // nothing was appended
    if (j == num_proposals || seq.token_ids.back() != guesses[static_cast<size_t>(j)]) break;
    ++accepted;
    if (seq.finished()) break;
    seq.num_computed_tokens += 1;  // the guess's K/V are the sampled token's
    kv_.cache_computed(seq.id, seq.token_ids, seq.num_computed_tokens);
  }
  ++speculation_stats_.num_drafts;
  speculation_stats_.num_draft_tokens += num_proposals;
  speculation_stats_.num_accepted_tokens += accepted;
  after_verification(seq, num_proposals, accepted, config_.speculative.num_speculative_tokens, *proposer_);
  return sampled;
}

// Which rows a pooling request's step returns: the final-normed hidden rows its pooling reads, or
// (a reranker) the logits of its last prompt token.
void Engine::pooling_rows(const PoolingSpec& spec, const Sequence& seq, int64_t num_tokens, SequenceStep& step) {
  const bool last_chunk = seq.num_computed_tokens + num_tokens == seq.num_prompt_tokens;
  step.logits = spec.task == PoolingTask::kScore && last_chunk;
  if (spec.task == PoolingTask::kScore) return;
  switch (spec.pooling_type) {
    case PoolingType::kMean: step.hidden = HiddenRows::kAll; break;
    case PoolingType::kCls: step.hidden = seq.num_computed_tokens == 0 ? HiddenRows::kFirst : HiddenRows::kNone; break;
    case PoolingType::kLast: step.hidden = last_chunk ? HiddenRows::kLast : HiddenRows::kNone; break;
  }
}

// Takes a pooling request's rows from the step that computed them (`hidden` [rows, hidden_size]
// f32 in position order; `logits` [vocab_size] f32 of its last prompt token, or null) and, once
// the whole prompt has run, its result (engine/pooling.h), which ends the request.
void Engine::pool(Sequence& seq, Request& req, std::span<const float> hidden, const float* logits) {
  const PoolingSpec& spec = *req.pooling;
  const int64_t hidden_size = model_.config().hidden_size;
  if (spec.pooling_type == PoolingType::kMean) {
    accumulate_rows(hidden, hidden_size, req.pooled_sum);
  } else if (!hidden.empty()) {
    req.pooled_row.assign(hidden.begin(), hidden.end());
  }
  if (seq.num_uncomputed_tokens() > 0) return;
  std::vector<float> result;
  if (spec.task == PoolingTask::kScore) {
    DITTO_CHECK(logits != nullptr) << "a reranker's last step computed no logits";
    result = {yes_no_score(std::span<const float>(logits, static_cast<size_t>(model_.config().vocab_size)),
                           spec.true_id, spec.false_id, spec.activation)};
  } else {
    const std::vector<float> pooled =
        spec.pooling_type == PoolingType::kMean ? mean_of(req.pooled_sum, seq.num_prompt_tokens) : req.pooled_row;
    DITTO_CHECK(static_cast<int64_t>(pooled.size()) == hidden_size) << "a pooling request missed its rows";
    result = finish_embedding(pooled, spec.dimensions, spec.activation);
  }
  output_.set_pooled(seq.request, std::move(result));
  finish_sequence(seq, FinishReason::kStop);
}

// `logits` [rows, vocab_size] f32 are the rows of the sequence's tokens from num_computed_tokens on.
void Engine::record_prompt_logprobs(const Sequence& seq, Request& req, const float* logits, int64_t rows) {
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t next = seq.num_computed_tokens + r + 1;  // the prompt token this row predicts
    if (next >= seq.num_prompt_tokens || !output_.wants_prompt_logprob(seq.request, next)) continue;
    const std::span<const float> row(logits + static_cast<size_t>(r) * vocab, vocab);
    const int32_t token = seq.token_ids[static_cast<size_t>(next)];
    const int64_t top_n = *req.params.prompt_logprobs;
    if (req.rescore_from >= 0 && next >= req.rescore_from) {  // scored as the sampler saw it
      SamplerInput in;
      in.logits = row;
      in.prompt_token_ids = std::span<const int32_t>(seq.token_ids.data(), static_cast<size_t>(req.rescore_from));
      in.output_token_ids = std::span<const int32_t>(seq.token_ids.data() + req.rescore_from,
                                                     static_cast<size_t>(next - req.rescore_from));
      in.eos_token_ids = eos_token_ids_;
      in.seed = *req.params.seed;
      in.logprobs_mode = config_.logprobs_mode;
      if (req.rescore_matcher) {  // rows come in position order, each once (recorded ones are skipped)
        DITTO_CHECK(next == req.rescore_position) << "a constrained output re-scored out of order";
        req.rescore_matcher->fill_mask(req.rescore_mask);
        in.grammar_mask = req.rescore_mask;
        req.rescore_matcher->accept(token);  // a token the constraint refused fails it: all-zero masks after
        ++req.rescore_position;
      }
      output_.set_prompt_logprob(seq.request, next, sampler_.score_as_sampled(in, req.params, token, top_n));
    } else {
      const LogprobsMode raw =
          config_.logprobs_mode == LogprobsMode::kRawLogits ? LogprobsMode::kRawLogits : LogprobsMode::kRawLogprobs;
      output_.set_prompt_logprob(seq.request, next, sampler_.score(row, token, top_n, raw));
    }
  }
}

// The outputs of the touched requests (OutputProcessor::report); finished requests are forgotten.
std::vector<RequestOutput> Engine::report(std::vector<int64_t> touched) {
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  std::vector<int64_t> finished;
  for (int64_t r : touched)
    if (requests_.contains(r) && output_.finished(r)) finished.push_back(r);
  std::vector<RequestOutput> done = output_.report(touched);
  for (int64_t r : finished) {
    const auto found = requests_.find(r);
    for (Sequence* seq : found->second->seqs) sequences_.erase(seq->id);
    request_index_.erase(found->second->request_id);
    requests_.erase(found);
    --num_unfinished_;
  }
  return done;
}

}  // namespace ditto
