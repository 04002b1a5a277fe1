#include "engine/engine.h"

#include <algorithm>
#include <random>
#include <string>
#include <unordered_map>

#include "core/error.h"

namespace ditto {

struct Engine::Request {
  RequestOutput out;
  SamplingParams params;
  std::vector<Sequence*> seqs;                                  // by choice
  std::vector<std::unique_ptr<IncrementalDetokenizer>> detok;  // by choice (null without tokenizer)
  int64_t unfinished = 0;
};

int64_t kv_blocks_for_memory(const ModelConfig& c, int64_t block_size, int64_t bytes) {
  const int64_t per_block = c.num_hidden_layers * 2 * block_size * c.num_key_value_heads * c.head_dim * 2;
  return per_block > 0 ? bytes / per_block : 0;
}

Engine::Engine(const CausalLM& model, const Tokenizer* tokenizer, std::vector<int32_t> eos_token_ids,
               const EngineConfig& config)
    : model_(model),
      tokenizer_(tokenizer),
      eos_token_ids_(std::move(eos_token_ids)),
      config_(config),
      kv_(config.num_kv_blocks, config.block_size, config.enable_prefix_caching),
      runner_(model, config.num_kv_blocks, config.block_size),
      scheduler_(config.scheduler, kv_) {}

Engine::~Engine() = default;

void Engine::add_request(const std::string& request_id, std::vector<int32_t> prompt_token_ids,
                         const SamplingParams& params, const std::string& prompt_text) {
  const ModelConfig& c = model_.config();
  if (prompt_token_ids.empty()) throw_invalid_argument("the prompt is empty");
  for (size_t i = 0; i < prompt_token_ids.size(); ++i)
    if (prompt_token_ids[i] < 0 || prompt_token_ids[i] >= c.vocab_size)
      throw_invalid_argument("prompt token " + std::to_string(i) + " = " + std::to_string(prompt_token_ids[i]) +
                             " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  const auto prompt_len = static_cast<int64_t>(prompt_token_ids.size());
  if (prompt_len >= c.max_position_embeddings)
    throw_invalid_argument("the prompt has " + std::to_string(prompt_len) +
                           " tokens; the model's context is " + std::to_string(c.max_position_embeddings) +
                           " (max_position_embeddings), which leaves no room for output");
  params.validate(c.vocab_size);
  if (!params.stop.empty() && tokenizer_ == nullptr)
    throw_invalid_argument("stop strings need the model's tokenizer (tokenizer.json)");
  const int64_t max_len = std::min(prompt_len + params.max_tokens, c.max_position_embeddings);
  const int64_t blocks = (max_len + config_.block_size - 1) / config_.block_size;
  if (blocks > config_.num_kv_blocks)
    throw_invalid_argument("the request needs " + std::to_string(blocks) + " KV cache blocks (" + std::to_string(prompt_len) +
                           " prompt tokens + max_tokens " + std::to_string(params.max_tokens) + ") but the cache has " +
                           std::to_string(config_.num_kv_blocks) + "; raise --kv-cache-memory or lower max_tokens");

  auto req = std::make_unique<Request>();
  req->params = params;
  req->out.request_id = request_id;
  req->out.prompt = prompt_text;
  req->out.prompt_token_ids = prompt_token_ids;
  req->out.seed = params.seed ? *params.seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  if (params.prompt_logprobs) req->out.prompt_logprobs.resize(prompt_token_ids.size());
  req->out.outputs.resize(static_cast<size_t>(params.n));
  req->unfinished = params.n;
  const auto index = static_cast<int64_t>(requests_.size());
  for (int64_t i = 0; i < params.n; ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->id = static_cast<int64_t>(sequences_.size());
    seq->request = index;
    seq->choice = i;
    seq->arrival = next_arrival_++;
    seq->token_ids = prompt_token_ids;
    seq->num_prompt_tokens = prompt_len;
    seq->use_prefix_cache = !(params.prompt_logprobs && i == 0);  // prompt logprobs need every row
    req->out.outputs[static_cast<size_t>(i)].index = i;
    req->seqs.push_back(seq.get());
    req->detok.push_back(tokenizer_ ? std::make_unique<IncrementalDetokenizer>(*tokenizer_, params.skip_special_tokens)
                                    : nullptr);
    scheduler_.add(seq.get());
    sequences_.push_back(std::move(seq));
  }
  requests_.push_back(std::move(req));
  ++num_unfinished_;
}

void Engine::abort(const std::string& request_id) {
  for (size_t r = 0; r < requests_.size(); ++r) {
    Request* req = requests_[r].get();
    if (req == nullptr || req->unfinished == 0 || req->out.request_id != request_id) continue;
    for (Sequence* seq : req->seqs)
      if (!seq->finished()) finish_sequence(*seq, FinishReason::kAbort);
    aborted_.push_back(r);
  }
}

void Engine::finish_sequence(Sequence& seq, FinishReason reason) {
  seq.finish = reason;
  scheduler_.remove(&seq);
  Request& req = *requests_[static_cast<size_t>(seq.request)];
  CompletionOutput& out = req.out.outputs[static_cast<size_t>(seq.choice)];
  out.finish_reason = reason == FinishReason::kLength ? "length" : reason == FinishReason::kAbort ? "abort" : "stop";
  if (auto& d = req.detok[static_cast<size_t>(seq.choice)]; d && !out.stop_string) out.text += d->finish();
  --req.unfinished;
}

void Engine::process_row(Sequence& seq, const float* logits) {
  Request& req = *requests_[static_cast<size_t>(seq.request)];
  const SamplingParams& p = req.params;
  CompletionOutput& out = req.out.outputs[static_cast<size_t>(seq.choice)];
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  SamplerInput in;
  in.logits = std::span<const float>(logits, vocab);
  in.prompt_token_ids = std::span<const int32_t>(seq.token_ids.data(), static_cast<size_t>(seq.num_prompt_tokens));
  in.output_token_ids = std::span<const int32_t>(seq.token_ids.data() + seq.num_prompt_tokens,
                                                 static_cast<size_t>(seq.num_output_tokens()));
  in.eos_token_ids = eos_token_ids_;
  in.seed = req.out.seed;
  in.choice = seq.choice;
  SampledToken s = sampler_.sample(in, p);
  const int32_t token = s.token.token_id;
  seq.token_ids.push_back(token);
  out.token_ids.push_back(token);
  out.cumulative_logprob += static_cast<double>(s.token.logprob);
  if (p.logprobs) out.logprobs.push_back(std::move(s));

  if (auto& d = req.detok[static_cast<size_t>(seq.choice)]) {
    const size_t before = out.text.size();
    out.text += d->add(token);
    // Stop strings on the text, earliest match first; only new text can complete one.
    size_t best = std::string::npos;
    const std::string* which = nullptr;
    for (const std::string& stop : p.stop) {
      const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
      const size_t at = out.text.find(stop, from);
      if (at != std::string::npos && at < best) {
        best = at;
        which = &stop;
      }
    }
    if (which != nullptr) {
      out.text.resize(best + (p.include_stop_str_in_output ? which->size() : 0));
      out.stop_string = *which;
      return finish_sequence(seq, FinishReason::kStop);
    }
  }
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end()) {
    out.stop_token_id = token;
    return finish_sequence(seq, FinishReason::kStop);
  }
  if (!p.ignore_eos && std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end())
    return finish_sequence(seq, FinishReason::kStop);
  if (seq.num_output_tokens() >= p.max_tokens ||
      static_cast<int64_t>(seq.token_ids.size()) >= model_.config().max_position_embeddings)
    return finish_sequence(seq, FinishReason::kLength);
}

std::vector<RequestOutput> Engine::step() {
  std::vector<size_t> touched = std::move(aborted_);
  aborted_.clear();
  const std::vector<ScheduledSequence> batch = scheduler_.schedule();
  // Every queued request fits the cache alone, so an idle step with work waiting is a bug; fail
  // loudly rather than let a caller's `while (has_unfinished()) step();` spin forever.
  DITTO_CHECK(!batch.empty() || touched.size() > 0 || scheduler_.num_waiting() + scheduler_.num_running() == 0)
      << "scheduler made no progress with " << scheduler_.num_waiting() << " waiting sequences";
  if (!batch.empty()) {
    std::vector<SequenceStep> steps;
    steps.reserve(batch.size());
    for (const ScheduledSequence& s : batch) {
      const Request& req = *requests_[static_cast<size_t>(s.seq->request)];
      SequenceStep step;
      step.token_ids = std::span<const int32_t>(s.seq->token_ids.data() + s.seq->num_computed_tokens,
                                                static_cast<size_t>(s.num_tokens));
      step.start_position = static_cast<int32_t>(s.seq->num_computed_tokens);
      step.block_table = kv_.block_table(s.seq->id);  // stable: nothing allocates until the step ends
      step.all_logits = req.params.prompt_logprobs && s.seq->choice == 0 &&
                        s.seq->num_computed_tokens < s.seq->num_prompt_tokens;
      steps.push_back(step);
    }
    std::vector<float> logits = runner_.step(steps);
    ++num_steps_;
    if (config_.logits_hook)
      for (size_t r = 0; r * static_cast<size_t>(model_.config().vocab_size) < logits.size(); ++r)
        config_.logits_hook(logits.data() + r * static_cast<size_t>(model_.config().vocab_size),
                            model_.config().vocab_size, static_cast<int64_t>(batch.size()));
    const auto vocab = static_cast<size_t>(model_.config().vocab_size);
    size_t row = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      Sequence& seq = *batch[i].seq;
      Request& req = *requests_[static_cast<size_t>(seq.request)];
      const int64_t start = seq.num_computed_tokens;
      const int64_t rows = steps[i].all_logits ? batch[i].num_tokens : 1;
      if (steps[i].all_logits) {
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t next = start + r + 1;  // the prompt token this row predicts
          if (next >= seq.num_prompt_tokens || req.out.prompt_logprobs[static_cast<size_t>(next)]) continue;
          req.out.prompt_logprobs[static_cast<size_t>(next)] =
              sampler_.score(std::span<const float>(logits.data() + (row + static_cast<size_t>(r)) * vocab, vocab),
                             seq.token_ids[static_cast<size_t>(next)], *req.params.prompt_logprobs);
        }
      }
      seq.num_computed_tokens += batch[i].num_tokens;
      kv_.cache_computed(seq.id, seq.token_ids, seq.num_computed_tokens);
      if (seq.num_uncomputed_tokens() == 0 && !seq.finished())
        process_row(seq, logits.data() + (row + static_cast<size_t>(rows - 1)) * vocab);
      row += static_cast<size_t>(rows);
      touched.push_back(static_cast<size_t>(seq.request));
    }
  }
  // Requests whose last choice finished in this step (or was aborted) are returned once.
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  std::vector<RequestOutput> done;
  for (size_t r : touched) {
    std::unique_ptr<Request>& req = requests_[r];
    if (req == nullptr || req->unfinished > 0) continue;
    req->out.finished = true;
    done.push_back(std::move(req->out));
    for (Sequence* seq : req->seqs) sequences_[static_cast<size_t>(seq->id)].reset();
    req.reset();
    --num_unfinished_;
  }
  return done;
}

}  // namespace ditto
