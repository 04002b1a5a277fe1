#include "engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "ditto/sampling_params.h"
#include "engine/llm_engine.h"

namespace ditto {
namespace {

struct Beam {
  std::vector<int32_t> tokens;
  std::vector<SampledToken> logprobs;
  double cum_logprob = 0.0;
};

bool is_eos(int32_t id, const std::vector<int32_t>& eos) { return std::find(eos.begin(), eos.end(), id) != eos.end(); }

// vLLM's get_beam_search_score (after Hugging Face's): a final EOS does not count in the length.
double score_of(const Beam& b, const std::vector<int32_t>& eos, float length_penalty) {
  auto len = static_cast<double>(b.tokens.size());
  if (!b.tokens.empty() && is_eos(b.tokens.back(), eos)) len -= 1.0;
  return b.cum_logprob / std::pow(std::max(len, 1.0), static_cast<double>(length_penalty));
}

// Keeps the `width` best of `beams` by score, a stable sort: equal scores keep their order.
void keep_best(std::vector<Beam>& beams, size_t width, const std::vector<int32_t>& eos, float length_penalty) {
  std::vector<std::pair<double, size_t>> order;
  for (size_t i = 0; i < beams.size(); ++i) order.emplace_back(score_of(beams[i], eos, length_penalty), i);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Beam> kept;
  for (size_t i = 0; i < std::min(width, order.size()); ++i) kept.push_back(std::move(beams[order[i].second]));
  beams = std::move(kept);
}

}  // namespace

void BeamSearchParams::validate(int64_t max_logprobs) const {
  if (beam_width < 1 || 2 * beam_width > max_logprobs)
    throw_invalid_field("beam_width", "beam_width must be in [1, " + std::to_string(max_logprobs / 2) +
                                          "] (each step asks for 2·beam_width logprobs, at most max_logprobs = " +
                                          std::to_string(max_logprobs) + "), got " + std::to_string(beam_width));
  if (max_tokens < 1)
    throw_invalid_field("max_tokens", "max_tokens must be at least 1, got " + std::to_string(max_tokens));
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    throw_invalid_field("temperature", "temperature must be a finite number >= 0");
  if (!std::isfinite(length_penalty)) throw_invalid_field("length_penalty", "length_penalty must be a finite number");
}

std::vector<BeamSearchOutput> run_beam_search(const std::vector<std::vector<int32_t>>& prompts,
                                              const BeamSearchParams& params, const std::vector<int32_t>& eos_token_ids,
                                              uint64_t seed, const BeamStepFn& step) {
  const std::vector<int32_t> no_eos;
  const std::vector<int32_t>& eos = params.ignore_eos ? no_eos : eos_token_ids;
  const auto width = static_cast<size_t>(params.beam_width);
  std::vector<std::vector<Beam>> live(prompts.size()), completed(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) live[i].push_back(Beam{.tokens = prompts[i], .logprobs = {}});
  for (int64_t t = 0; t < params.max_tokens; ++t) {
    std::vector<BeamStepRequest> requests;
    for (const std::vector<Beam>& beams : live)
      for (size_t b = 0; b < beams.size(); ++b)
        requests.push_back(
            {&beams[b].tokens, derived_seed(seed, static_cast<uint64_t>(t) * width + static_cast<uint64_t>(b))});
    if (requests.empty()) break;
    const std::vector<std::optional<SampledToken>> next = step(requests);
    DITTO_CHECK(next.size() == requests.size())
        << "beam search: the step returned " << next.size() << " rows for " << requests.size() << " beams";
    size_t k = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<Beam> grown;
      for (const Beam& beam : live[i]) {
        const std::optional<SampledToken>& row = next[k++];
        if (!row) continue;  // the context is full: the beam ends where it is (vLLM drops it too)
        // Candidates: the beam's own token, then its top logprobs by rank (vLLM's dict order).
        std::vector<TokenLogprob> candidates = {row->token};
        for (const TokenLogprob& e : row->top_logprobs)
          if (e.token_id != row->token.token_id) candidates.push_back(e);
        for (const TokenLogprob& c : candidates) {
          Beam b = beam;
          b.tokens.push_back(c.token_id);
          b.logprobs.push_back(SampledToken{c, candidates});
          b.cum_logprob += static_cast<double>(c.logprob);
          (is_eos(c.token_id, eos) ? completed[i] : grown).push_back(std::move(b));
        }
      }
      keep_best(grown, width, eos, params.length_penalty);
      live[i] = std::move(grown);
    }
  }
  std::vector<BeamSearchOutput> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<Beam>& all = completed[i];
    for (Beam& b : live[i]) all.push_back(std::move(b));
    keep_best(all, width, eos, params.length_penalty);
    for (Beam& b : all) {
      BeamSearchSequence s;
      s.num_prompt_tokens = static_cast<int64_t>(prompts[i].size());
      s.score = score_of(b, eos, params.length_penalty);
      s.finish_reason = !b.tokens.empty() && is_eos(b.tokens.back(), eos) ? "stop" : "length";
      s.tokens = std::move(b.tokens);
      s.logprobs = std::move(b.logprobs);
      s.cum_logprob = b.cum_logprob;
      out[i].sequences.push_back(std::move(s));
    }
  }
  return out;
}

std::vector<BeamSearchOutput> beam_search_on(LLMEngine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                             const BeamSearchParams& params, uint64_t seed,
                                             const std::function<void(float*, int64_t, int64_t)>& logits_hook) {
  const int64_t context = engine.max_model_len();
  const BeamStepFn step = [&](const std::vector<BeamStepRequest>& requests) {
    std::vector<PromptInput> batch;
    std::vector<SamplingParams> batch_params;
    std::vector<size_t> row_of;  // request → batch index; SIZE_MAX: its context is full
    for (const BeamStepRequest& r : requests) {
      if (static_cast<int64_t>(r.tokens->size()) >= context) {
        row_of.push_back(SIZE_MAX);
        continue;
      }
      row_of.push_back(batch.size());
      batch.push_back(PromptInput{.token_ids = *r.tokens});
      SamplingParams p;
      p.max_tokens = 1;
      p.ignore_eos = true;
      p.temperature = params.temperature;
      p.logprobs = 2 * params.beam_width;
      p.seed = r.seed;
      batch_params.push_back(std::move(p));
    }
    std::vector<GenerateResult> results;
    if (!batch.empty()) results = engine.generate(batch, batch_params, {}, logits_hook);
    std::vector<std::optional<SampledToken>> out;
    for (size_t row : row_of) {
      if (row == SIZE_MAX) {
        out.emplace_back();
        continue;
      }
      GenerateResult& r = results[row];
      if (r.error) throw_invalid_argument("beam search: " + *r.error);
      out.emplace_back(std::move(r.output.outputs.at(0).logprobs.at(0)));
    }
    return out;
  };
  return run_beam_search(prompts, params, engine.eos_token_ids(), seed, step);
}

}  // namespace ditto
