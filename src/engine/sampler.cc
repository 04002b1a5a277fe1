#include "engine/sampler.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/philox.h"
#include "kernels/softmax.h"

namespace ditto {
namespace {

constexpr uint32_t kSamplingTag = 0x534d504cu;  // "SMPL": keeps these draws apart from other uses of a seed

// Count of each token in `ids` as sorted (token, count) pairs.
std::vector<std::pair<int32_t, int64_t>> counts(std::span<const int32_t> ids) {
  std::vector<int32_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<int32_t, int64_t>> out;
  for (int32_t id : sorted) {
    if (!out.empty() && out.back().first == id) {
      ++out.back().second;
    } else {
      out.emplace_back(id, 1);
    }
  }
  return out;
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Step 2: the masks — the structured-output constraint's, allowed_token_ids, bad words, and before min_tokens outputs
// no token that may stop the choice. `keep` is scratch.
void apply_masks(const SamplerInput& in, const SamplingParams& p, std::vector<float>& logits,
                 std::vector<uint8_t>& keep) {
  const auto vocab = static_cast<int64_t>(logits.size());
  if (!in.grammar_mask.empty()) {
    DITTO_CHECK(in.grammar_mask.size() * 32 >= logits.size()) << "a grammar mask shorter than the vocabulary";
    for (size_t w = 0; w * 32 < logits.size(); ++w) {  // a word at a time: most are all in or all out
      const uint32_t bits = in.grammar_mask[w];
      if (bits == ~0u) continue;
      const size_t end = std::min(logits.size(), w * 32 + 32);
      if (bits == 0) {
        std::fill(logits.begin() + static_cast<std::ptrdiff_t>(w * 32),
                  logits.begin() + static_cast<std::ptrdiff_t>(end), kNegInf);
        continue;
      }
      for (size_t i = w * 32; i < end; ++i)
        if (((bits >> (i - w * 32)) & 1u) == 0) logits[i] = kNegInf;
    }
  }
  if (p.allowed_token_ids) {
    keep.assign(logits.size(), 0);
    for (int32_t id : *p.allowed_token_ids)
      if (id >= 0 && id < vocab) keep[static_cast<size_t>(id)] = 1;
    for (size_t i = 0; i < logits.size(); ++i)
      if (!keep[i]) logits[i] = kNegInf;
  }
  const std::span<const int32_t> out = in.output_token_ids;
  for (const std::vector<int32_t>& word : p.bad_words_token_ids) {
    if (word.empty() || word.size() - 1 > out.size()) continue;
    const size_t prefix = word.size() - 1;
    if (std::equal(word.begin(), word.end() - 1, out.end() - static_cast<std::ptrdiff_t>(prefix)) && word.back() >= 0 &&
        word.back() < vocab)
      logits[static_cast<size_t>(word.back())] = kNegInf;
  }
  if (static_cast<int64_t>(out.size()) < p.min_tokens) {
    if (!p.ignore_eos)
      for (int32_t id : in.eos_token_ids)
        if (id >= 0 && id < vocab) logits[static_cast<size_t>(id)] = kNegInf;
    for (int32_t id : p.stop_token_ids)
      if (id >= 0 && id < vocab) logits[static_cast<size_t>(id)] = kNegInf;
  }
  // Step 3: logit_bias (std::map: ascending ids).
  for (const auto& [id, bias] : p.logit_bias)
    if (id >= 0 && id < vocab) logits[static_cast<size_t>(id)] += bias;
}

// Step 4: the penalties, each token once, in ascending id order.
void apply_penalties(const SamplerInput& in, const SamplingParams& p, std::vector<float>& logits) {
  const auto vocab = static_cast<int64_t>(logits.size());
  if (p.repetition_penalty != 1.0f) {
    std::vector<int32_t> seen(in.prompt_token_ids.begin(), in.prompt_token_ids.end());
    seen.insert(seen.end(), in.output_token_ids.begin(), in.output_token_ids.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= vocab) continue;
      float& x = logits[static_cast<size_t>(id)];
      x = x > 0.0f ? x / p.repetition_penalty : x * p.repetition_penalty;
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (const auto& [id, count] : counts(in.output_token_ids)) {
      if (id < 0 || id >= vocab) continue;
      float& x = logits[static_cast<size_t>(id)];
      x = x - p.frequency_penalty * static_cast<float>(count);
      x = x - p.presence_penalty;
    }
  }
}

// Step 5's filters: the ids of `prob` [vocab] that min_p, top_k and top_p keep, into `ids` — in
// (probability desc, id asc) order when top_k or top_p is on, in ascending id order otherwise.
void filter_candidates(const float* prob, int64_t vocab, const SamplingParams& p, std::vector<int32_t>& ids) {
  ids.clear();
  float p_max = 0.0f;
  for (int64_t i = 0; i < vocab; ++i) p_max = prob[i] > p_max ? prob[i] : p_max;
  const float min_keep = p.min_p * p_max;
  for (int64_t i = 0; i < vocab; ++i)
    if (prob[i] > 0.0f && prob[i] >= min_keep) ids.push_back(static_cast<int32_t>(i));
  const bool sorted_filter = p.top_k_enabled() || p.top_p < 1.0f;
  if (!sorted_filter) return;
  auto before = [&](int32_t a, int32_t b) { return prob[a] != prob[b] ? prob[a] > prob[b] : a < b; };
  if (p.top_k_enabled() && p.top_k < static_cast<int64_t>(ids.size())) {
    std::partial_sort(ids.begin(), ids.begin() + p.top_k, ids.end(), before);
    ids.resize(static_cast<size_t>(p.top_k));
  } else {
    std::sort(ids.begin(), ids.end(), before);
  }
  if (p.top_p < 1.0f) {
    double total = 0.0;
    for (int32_t id : ids) total += prob[id];
    double cum = 0.0;
    size_t keep = 0;
    while (keep < ids.size()) {
      cum += prob[ids[keep++]];
      if (cum >= static_cast<double>(p.top_p) * total) break;
    }
    ids.resize(keep);
  }
}

// Step 5's draw: the inverse CDF of the candidates' renormalised probabilities at u in [0, 1),
// summed sequentially in double in the candidates' order. `ids` is not empty.
int32_t draw(const float* prob, const std::vector<int32_t>& ids, double u) {
  double total = 0.0;
  for (int32_t id : ids) total += prob[id];
  const double target = u * total;
  double cum = 0.0;
  for (int32_t id : ids) {
    cum += prob[id];
    if (cum > target) return id;
  }
  return ids.back();
}

}  // namespace

double sampling_uniform(uint64_t seed, int64_t choice, int64_t t) {
  const auto r = philox4x32_10({static_cast<uint32_t>(t), static_cast<uint32_t>(static_cast<uint64_t>(t) >> 32),
                                static_cast<uint32_t>(choice), kSamplingTag},
                               {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const uint64_t bits = ((uint64_t{r[0]} << 32) | r[1]) >> 11;  // 53 bits
  return static_cast<double>(bits) * 0x1p-53;
}

void Sampler::raw_logprobs(std::span<const float> logits) {
  if (logits.empty()) throw_invalid_argument("sampler: empty logits row");
  logprobs_.resize(logits.size());
  log_softmax_row(logits.data(), static_cast<int64_t>(logits.size()), logprobs_.data());
}

TokenLogprob Sampler::entry(int32_t token_id) const {
  const float lp = logprobs_[static_cast<size_t>(token_id)];
  int64_t greater = 0;
  for (float x : logprobs_) greater += x > lp;
  TokenLogprob t;
  t.token_id = token_id;
  t.logprob = lp;
  t.rank = greater + 1;
  return t;
}

std::vector<TokenLogprob> Sampler::top(int64_t n) {
  const auto vocab = static_cast<int64_t>(logprobs_.size());
  n = std::min(n, vocab);
  std::vector<TokenLogprob> out;
  if (n <= 0) return out;
  ids_.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) ids_[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  // (logprob desc, id asc): a total order, so the result is unique. NaN sorts last.
  auto before = [&](int32_t a, int32_t b) {
    const float la = logprobs_[static_cast<size_t>(a)], lb = logprobs_[static_cast<size_t>(b)];
    const bool na = la != la, nb = lb != lb;
    if (na != nb) return nb;
    if (!na && la != lb) return la > lb;
    return a < b;
  };
  std::partial_sort(ids_.begin(), ids_.begin() + n, ids_.end(), before);
  int64_t rank = 1;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids_[static_cast<size_t>(i)];
    if (i > 0 && logprobs_[static_cast<size_t>(id)] < out.back().logprob) rank = i + 1;
    TokenLogprob& t = out.emplace_back();
    t.token_id = id;
    t.logprob = logprobs_[static_cast<size_t>(id)];
    t.rank = rank;
  }
  return out;
}

SampledToken Sampler::score(std::span<const float> logits, int32_t token_id, int64_t top_n, LogprobsMode mode) {
  if (mode == LogprobsMode::kRawLogits) {
    if (logits.empty()) throw_invalid_argument("sampler: empty logits row");
    logprobs_.assign(logits.begin(), logits.end());
  } else {
    raw_logprobs(logits);
  }
  if (token_id < 0 || static_cast<size_t>(token_id) >= logits.size())
    throw_invalid_argument("token id " + std::to_string(token_id) + " is outside the vocabulary [0, " +
                           std::to_string(logits.size()) + ")");
  return {entry(token_id), top(top_n)};
}

int32_t Sampler::run(const SamplerInput& in, const SamplingParams& p) {
  if (in.logits.empty()) throw_invalid_argument("sampler: empty logits row");
  const auto vocab = static_cast<int64_t>(in.logits.size());
  switch (in.logprobs_mode) {  // step 1
    case LogprobsMode::kRawLogprobs: raw_logprobs(in.logits); break;
    case LogprobsMode::kRawLogits: logprobs_.assign(in.logits.begin(), in.logits.end()); break;
    case LogprobsMode::kProcessedLogprobs:
    case LogprobsMode::kProcessedLogits: break;
  }
  const bool processed =
      in.logprobs_mode == LogprobsMode::kProcessedLogprobs || in.logprobs_mode == LogprobsMode::kProcessedLogits;
  work_.assign(in.logits.begin(), in.logits.end());
  const auto t = static_cast<int64_t>(in.output_token_ids.size());
  apply_masks(in, p, work_, keep_);
  apply_penalties(in, p, work_);

  int32_t chosen = 0;
  if (p.greedy()) {
    chosen = static_cast<int32_t>(argmax_row(work_.data(), vocab));
    if (processed) scaled_ = work_;  // greedy: no temperature, no filters
  } else {
    // 5. Temperature, softmax, filters, draw.
    for (float& x : work_) x = x / p.temperature;
    scaled_ = work_;
    softmax_row(work_.data(), vocab, work_.data());
    filter_candidates(work_.data(), vocab, p, ids_);
    if (ids_.empty()) {  // every probability underflowed or NaN: fall back to the best processed logit
      chosen = static_cast<int32_t>(argmax_row(scaled_.data(), vocab));
    } else {
      chosen = draw(work_.data(), ids_, sampling_uniform(in.seed, in.choice, t));
    }
    if (processed && (p.min_p > 0.0f || p.top_k_enabled() || p.top_p < 1.0f)) {
      keep_.assign(scaled_.size(), 0);
      for (int32_t id : ids_) keep_[static_cast<size_t>(id)] = 1;
      for (size_t i = 0; i < scaled_.size(); ++i)
        if (!keep_[i]) scaled_[i] = kNegInf;
    }
  }
  // 6. The processed modes' row.
  if (in.logprobs_mode == LogprobsMode::kProcessedLogits) {
    logprobs_ = scaled_;
  } else if (in.logprobs_mode == LogprobsMode::kProcessedLogprobs) {
    logprobs_.resize(scaled_.size());
    log_softmax_row(scaled_.data(), vocab, logprobs_.data());
  }
  return chosen;
}

SampledToken Sampler::sample(const SamplerInput& in, const SamplingParams& p) {
  const int32_t chosen = run(in, p);
  SampledToken out{entry(chosen), {}};
  if (p.logprob_token_ids) {
    for (int32_t id : *p.logprob_token_ids) out.top_logprobs.push_back(entry(id));
  } else if (p.logprobs) {
    out.top_logprobs = top(*p.logprobs);
  }
  return out;
}

SampledToken Sampler::score_as_sampled(const SamplerInput& in, const SamplingParams& p, int32_t token_id,
                                       int64_t top_n) {
  run(in, p);
  if (token_id < 0 || static_cast<size_t>(token_id) >= in.logits.size())
    throw_invalid_argument("token id " + std::to_string(token_id) + " is outside the vocabulary [0, " +
                           std::to_string(in.logits.size()) + ")");
  return {entry(token_id), top(top_n)};
}

}  // namespace ditto
