#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"

namespace ditto {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

SamplerInput input(const std::vector<float>& logits, uint64_t seed = 1, int64_t choice = 0,
                   std::span<const int32_t> output = {}) {
  SamplerInput in;
  in.logits = logits;
  in.output_token_ids = output;
  in.seed = seed;
  in.choice = choice;
  return in;
}

std::string validation_error(const SamplingParams& p) {
  try {
    p.validate(100);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingParamsTest, DefaultsAreVllms) {
  const SamplingParams p;
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_NO_THROW(p.validate(100));
}

TEST(SamplingParamsTest, EachBadFieldIsNamed) {
  auto with = [](auto set) {
    SamplingParams p;
    set(p);
    return validation_error(p);
  };
  EXPECT_EQ(with([](SamplingParams& p) { p.top_p = 1.5f; }), "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(with([](SamplingParams& p) { p.top_p = 0.0f; }), "top_p must be in (0, 1], got 0");
  EXPECT_EQ(with([](SamplingParams& p) { p.n = 0; }), "n must be in [1, 128], got 0");
  EXPECT_EQ(with([](SamplingParams& p) { p.max_tokens = 0; }), "max_tokens must be at least 1, got 0");
  EXPECT_EQ(with([](SamplingParams& p) { p.max_tokens = -3; }), "max_tokens must be at least 1, got -3");
  EXPECT_EQ(with([](SamplingParams& p) { p.temperature = -1.0f; }), "temperature must be a finite number >= 0, got -1");
  EXPECT_EQ(with([](SamplingParams& p) { p.top_k = -2; }), "top_k must be -1, 0 (off) or a positive count, got -2");
  EXPECT_EQ(with([](SamplingParams& p) { p.min_p = 2.0f; }), "min_p must be in [0, 1], got 2");
  EXPECT_EQ(with([](SamplingParams& p) { p.presence_penalty = 3.0f; }), "presence_penalty must be in [-2, 2], got 3");
  EXPECT_EQ(with([](SamplingParams& p) { p.repetition_penalty = 0.0f; }),
            "repetition_penalty must be a finite number > 0, got 0");
  EXPECT_EQ(with([](SamplingParams& p) { p.min_tokens = 20; }), "min_tokens (20) must not exceed max_tokens (16)");
  EXPECT_EQ(with([](SamplingParams& p) { p.logprobs = 101; }), "logprobs must be in [0, vocab size 100], got 101");
  EXPECT_EQ(with([](SamplingParams& p) { p.stop = {"a", ""}; }), "stop[1] is an empty string");
  EXPECT_EQ(with([](SamplingParams& p) {
              p.stop_token_ids = {5, 100};
            }),
            "stop_token_ids[1] = 100 is outside the vocabulary [0, 100)");
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToTheLowestId) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  const auto logits = logits_of({0.5f, 2.0f, -1.0f, 2.0f, 1.0f});
  EXPECT_EQ(s.sample(input(logits), p).token.token_id, 1);
  for (uint64_t seed : {1u, 2u, 3u}) EXPECT_EQ(s.sample(input(logits, seed), p).token.token_id, 1);
}

// Structured outputs: the grammar mask comes first among the masks, so logit_bias cannot bring a
// forbidden token back; the raw logprobs are the model's, the processed ones the masked row's.
TEST(SamplerTest, TheGrammarMaskComesBeforeLogitBiasAndOnlyTheProcessedRowSeesIt) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{0, 50.0f}};
  std::vector<float> logits(40, 0.0f);
  logits[1] = 3.0f;                                     // the argmax, forbidden
  logits[33] = 1.0f;                                    // allowed, in the second mask word
  const std::vector<uint32_t> mask = {0b1000u, 0b10u};  // tokens 3 and 33
  SamplerInput in = input(logits);
  in.grammar_mask = mask;
  EXPECT_EQ(s.sample(in, p).token.token_id, 33);  // not 1 (masked) and not 0 (bias on a masked token)
  p.temperature = 1.0f;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    in.seed = seed;
    const int32_t t = s.sample(in, p).token.token_id;
    EXPECT_TRUE(t == 3 || t == 33) << t;
  }
  p.temperature = 0.0f;
  in.logprobs_mode = LogprobsMode::kRawLogprobs;
  const float raw = s.sample(in, p).token.logprob;
  in.logprobs_mode = LogprobsMode::kProcessedLogprobs;
  const float processed = s.sample(in, p).token.logprob;
  EXPECT_LT(raw, processed);
  // The masked row gives the two allowed tokens all the mass: log(e^1 / (e^1 + e^0)).
  EXPECT_NEAR(processed, std::log(std::exp(1.0) / (std::exp(1.0) + 1.0)), 1e-5);
}

TEST(SamplerTest, DrawIsAPureFunctionOfSeedChoiceAndPosition) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 0.37f) * 3.0f;
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  Sampler a, b;
  std::vector<int32_t> out_a, out_b;
  for (int t = 0; t < 30; ++t) out_a.push_back(a.sample(input(logits, 42, 0, out_a), p).token.token_id);
  // Interleave unrelated draws on b: they must not change choice 0's stream.
  std::vector<int32_t> other;
  for (int t = 0; t < 30; ++t) {
    other.push_back(b.sample(input(logits, 7, 3, other), p).token.token_id);
    out_b.push_back(b.sample(input(logits, 42, 0, out_b), p).token.token_id);
  }
  EXPECT_EQ(out_a, out_b);
  // Another choice index is another stream.
  std::vector<int32_t> choice1;
  for (int t = 0; t < 30; ++t) choice1.push_back(a.sample(input(logits, 42, 1, choice1), p).token.token_id);
  EXPECT_NE(choice1, out_a);
  EXPECT_EQ(sampling_uniform(42, 0, 5), sampling_uniform(42, 0, 5));
  EXPECT_NE(sampling_uniform(42, 0, 5), sampling_uniform(42, 1, 5));
  EXPECT_NE(sampling_uniform(42, 0, 5), sampling_uniform(43, 0, 5));
}

TEST(SamplerTest, FrequenciesMatchTheTemperedSoftmax) {
  // Independent reference: p_i ∝ exp(l_i / T) in double. 40,000 draws over positions t (each its
  // own Philox number); every frequency within 5 standard deviations of its probability.
  const std::vector<float> logits = logits_of({1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f});
  const double temperature = 0.7;
  std::vector<double> ref(logits.size());
  double z = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) z += ref[i] = std::exp(logits[i] / temperature);
  for (double& r : ref) r /= z;
  SamplingParams p;
  p.temperature = static_cast<float>(temperature);
  Sampler s;
  const int draws = 40000;
  std::vector<int> hits(logits.size());
  std::vector<int32_t> history;
  for (int t = 0; t < draws; ++t) {
    // The position t is the history's length; a fake history of zeros has no effect here.
    history.resize(static_cast<size_t>(t));
    SamplerInput in = input(logits, 99);
    in.output_token_ids = history;
    ++hits[static_cast<size_t>(s.sample(in, p).token.token_id)];
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    const double sd = std::sqrt(ref[i] * (1 - ref[i]) / draws);
    EXPECT_NEAR(hits[i] / static_cast<double>(draws), ref[i], 5 * sd) << "token " << i;
  }
}

TEST(SamplerTest, TopKTopPAndMinPKeepOnlyTheirSets) {
  const std::vector<float> logits = logits_of({3.0f, 2.0f, 2.0f, 1.0f, 0.0f, -1.0f});
  Sampler s;
  auto support = [&](const SamplingParams& p) {
    std::map<int32_t, int> seen;
    std::vector<int32_t> history;
    for (int t = 0; t < 3000; ++t) {
      history.resize(static_cast<size_t>(t));
      SamplerInput in = input(logits, 5);
      in.output_token_ids = history;
      ++seen[s.sample(in, p).token.token_id];
    }
    std::vector<int32_t> ids;
    for (const auto& [id, n] : seen) ids.push_back(id);
    return ids;
  };
  SamplingParams p;
  p.top_k = 1;
  EXPECT_EQ(support(p), std::vector<int32_t>({0}));
  p.top_k = 2;  // tokens 1 and 2 tie for second place: the lower id wins
  EXPECT_EQ(support(p), std::vector<int32_t>({0, 1}));
  p.top_k = 0;
  // softmax of (3,2,2,1,0,-1): 0.4661, 0.1715 (×2), 0.0631, 0.0232, 0.0085. top_p 0.6 keeps the
  // two most likely in (prob desc, id asc) order: 0 and 1 (0.6376 ≥ 0.6).
  p.top_p = 0.6f;
  EXPECT_EQ(support(p), std::vector<int32_t>({0, 1}));
  p.top_p = 1.0f;
  p.min_p = 0.3f;  // keep p ≥ 0.3 · 0.4661 = 0.1398
  EXPECT_EQ(support(p), std::vector<int32_t>({0, 1, 2}));
}

TEST(SamplerTest, PenaltiesFollowVllmsFormulas) {
  // Greedy picks reveal the processed logits: compare against the formulas by hand.
  const std::vector<float> logits = logits_of({2.0f, 1.9f, -0.5f, -0.6f});
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  const std::vector<int32_t> prompt = {0};
  SamplerInput in = input(logits);
  in.prompt_token_ids = prompt;
  EXPECT_EQ(s.sample(in, p).token.token_id, 0);
  p.repetition_penalty = 1.1f;  // token 0: 2.0 / 1.1 = 1.818 < 1.9
  EXPECT_EQ(s.sample(in, p).token.token_id, 1);
  p.repetition_penalty = 1.0f;
  const std::vector<int32_t> output = {0, 0, 1};
  in.output_token_ids = output;
  p.frequency_penalty = 0.06f;  // token 0: 2.0 − 2·0.06 = 1.88; token 1: 1.9 − 0.06 = 1.84
  EXPECT_EQ(s.sample(in, p).token.token_id, 0);
  p.frequency_penalty = 0.2f;  // token 0: 1.6; token 1: 1.7
  EXPECT_EQ(s.sample(in, p).token.token_id, 1);
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 2.0f;  // tokens 0 and 1 drop by 2 each: 0.0 and −0.1, still above −0.5
  EXPECT_EQ(s.sample(in, p).token.token_id, 0);
  // Negative logits are multiplied by the repetition penalty.
  const std::vector<float> neg = logits_of({-1.0f, -1.05f});
  SamplerInput in2 = input(neg);
  const std::vector<int32_t> prompt2 = {0};
  in2.prompt_token_ids = prompt2;
  p.presence_penalty = 0.0f;
  p.repetition_penalty = 1.1f;  // −1.1 < −1.05
  EXPECT_EQ(s.sample(in2, p).token.token_id, 1);
}

TEST(SamplerTest, MinTokensMasksEosAndStopTokens) {
  const std::vector<float> logits = logits_of({0.0f, 5.0f, 4.0f, 1.0f});
  const std::vector<int32_t> eos = {1};
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {2};
  SamplerInput in = input(logits);
  in.eos_token_ids = eos;
  EXPECT_EQ(s.sample(in, p).token.token_id, 3);  // t = 0 < 2: EOS (1) and stop id (2) masked
  const std::vector<int32_t> two = {3, 3};
  in.output_token_ids = two;
  EXPECT_EQ(s.sample(in, p).token.token_id, 1);  // t = 2: EOS allowed
  p.ignore_eos = true;
  in.output_token_ids = {};
  EXPECT_EQ(s.sample(in, p).token.token_id, 1);  // ignore_eos: EOS is just a token, not masked
}

TEST(SamplerTest, LogprobsAreTheRawLogSoftmaxWithRanksAndIdTies) {
  const std::vector<float> logits = logits_of({1.0f, 3.0f, 3.0f, -2.0f, 0.5f});
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 3;
  p.repetition_penalty = 2.0f;  // penalties change the choice, not the reported logprobs
  const std::vector<int32_t> prompt = {1};
  SamplerInput in = input(logits);
  in.prompt_token_ids = prompt;
  const SampledToken got = s.sample(in, p);
  EXPECT_EQ(got.token.token_id, 2);
  EXPECT_NEAR(got.token.logprob, 3.0 - std::log(z), 2e-6);
  EXPECT_EQ(got.token.rank, 1);
  ASSERT_EQ(got.top_logprobs.size(), 3u);
  EXPECT_EQ(got.top_logprobs[0].token_id, 1);
  EXPECT_EQ(got.top_logprobs[1].token_id, 2);
  EXPECT_EQ(got.top_logprobs[2].token_id, 0);
  EXPECT_EQ(got.top_logprobs[1].rank, 1);
  EXPECT_EQ(got.top_logprobs[2].rank, 3);
  EXPECT_EQ(std::bit_cast<uint32_t>(got.top_logprobs[1].logprob), std::bit_cast<uint32_t>(got.token.logprob));
  // score() reports the same entry bits for the same row: decode logprob == re-scored logprob.
  const SampledToken scored = s.score(logits, 2, 3);
  EXPECT_EQ(std::bit_cast<uint32_t>(scored.token.logprob), std::bit_cast<uint32_t>(got.token.logprob));
  EXPECT_EQ(scored.token.rank, 1);
  EXPECT_THROW(s.score(logits, 5, 0), Error);
}

TEST(SamplingParamsTest, NewFieldsAreCheckedAgainstTheVocabulary) {
  auto with = [](auto set) {
    SamplingParams p;
    set(p);
    return validation_error(p);
  };
  EXPECT_EQ(with([](SamplingParams& p) {
              p.logit_bias = {{100, 1.0f}};
            }),
            "logit_bias token id = 100 is outside the vocabulary [0, 100)");
  EXPECT_EQ(with([](SamplingParams& p) { p.logit_bias = {{3, INFINITY}}; }), "logit_bias[3] must be a finite number");
  EXPECT_EQ(with([](SamplingParams& p) { p.allowed_token_ids = std::vector<int32_t>{}; }),
            "allowed_token_ids must not be empty");
  EXPECT_EQ(with([](SamplingParams& p) {
              p.allowed_token_ids = std::vector<int32_t>{1, -2};
            }),
            "allowed_token_ids[1] = -2 is outside the vocabulary [0, 100)");
  EXPECT_EQ(with([](SamplingParams& p) {
              p.bad_words_token_ids = {{1, 200}};
            }),
            "bad word 0 token 1 = 200 is outside the vocabulary [0, 100)");
  EXPECT_EQ(with([](SamplingParams& p) { p.truncate_prompt_tokens = 0; }),
            "truncate_prompt_tokens must be -1 (the context) or at least 1, got 0");
  EXPECT_EQ(with([](SamplingParams& p) { p.truncate_prompt_tokens = -1; }), "");
}

TEST(SamplerTest, AllowedTokenIdsBadWordsAndLogitBias) {
  const std::vector<float> logits = logits_of({5.0f, 4.0f, 3.0f, 2.0f, 1.0f});
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  SamplerInput in = input(logits);
  p.allowed_token_ids = std::vector<int32_t>{2, 4};
  EXPECT_EQ(s.sample(in, p).token.token_id, 2);
  // Sampled, too: only allowed ids ever come out.
  p.temperature = 1.0f;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const int32_t id = s.sample(input(logits, seed), p).token.token_id;
    EXPECT_TRUE(id == 2 || id == 4) << id;
  }
  p = SamplingParams{};
  p.temperature = 0.0f;
  p.logit_bias = {{3, 3.5f}};  // 2 + 3.5 = 5.5 > 5
  EXPECT_EQ(s.sample(in, p).token.token_id, 3);
  p.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(s.sample(in, p).token.token_id, 1);
  // A one-token bad word is banned everywhere; a two-token one only after its first token.
  p.logit_bias.clear();
  p.bad_words_token_ids = {{0}, {4, 1}};
  EXPECT_EQ(s.sample(in, p).token.token_id, 1);
  const std::vector<int32_t> after_four = {2, 4};
  in.output_token_ids = after_four;
  EXPECT_EQ(s.sample(in, p).token.token_id, 2);  // 0 and 1 banned
  const std::vector<int32_t> after_three = {4, 3};
  in.output_token_ids = after_three;
  EXPECT_EQ(s.sample(in, p).token.token_id, 1);  // the output does not end with 4
}

// The processed row by the formulas of docs/NUMERICS.md, in float64: bias, penalties (none here),
// temperature, then top_k; filtered tokens at -inf.
TEST(SamplerTest, LogprobsModesAgainstAFloat64Reference) {
  const std::vector<float> logits = logits_of({1.0f, 3.0f, 2.5f, -2.0f, 0.5f, 2.0f});
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 3;
  p.logit_bias = {{4, 2.25f}};  // token 4: 2.75, now the second most likely
  p.logprobs = 6;
  const std::vector<double> biased = {1.0, 3.0, 2.5, -2.0, 2.75, 2.0};
  std::vector<double> processed(biased.size());
  const double temp = static_cast<double>(0.7f);
  for (size_t i = 0; i < biased.size(); ++i) processed[i] = biased[i] / temp;
  const std::vector<bool> kept = {false, true, true, false, true, false};  // top 3: ids 1, 4, 2
  double z = 0.0;
  for (size_t i = 0; i < processed.size(); ++i)
    if (kept[i]) z += std::exp(processed[i]);
  double z_raw = 0.0;
  for (float l : logits) z_raw += std::exp(static_cast<double>(l));
  Sampler s;
  for (LogprobsMode mode : {LogprobsMode::kRawLogprobs, LogprobsMode::kRawLogits, LogprobsMode::kProcessedLogprobs,
                            LogprobsMode::kProcessedLogits}) {
    SCOPED_TRACE(logprobs_mode_name(mode));
    SamplerInput in = input(logits, 11);
    in.logprobs_mode = mode;
    const SampledToken got = s.sample(in, p);
    const int32_t id = got.token.token_id;
    EXPECT_TRUE(kept[static_cast<size_t>(id)]);
    std::map<int32_t, float> by_id;
    for (const TokenLogprob& t : got.top_logprobs) by_id[t.token_id] = t.logprob;
    ASSERT_EQ(by_id.size(), 6u);
    for (int32_t i = 0; i < 6; ++i) {
      const auto u = static_cast<size_t>(i);
      double want = 0.0;
      switch (mode) {
        case LogprobsMode::kRawLogprobs: want = logits[u] - std::log(z_raw); break;
        case LogprobsMode::kRawLogits: want = logits[u]; break;
        case LogprobsMode::kProcessedLogprobs: want = kept[u] ? processed[u] - std::log(z) : -INFINITY; break;
        case LogprobsMode::kProcessedLogits: want = kept[u] ? processed[u] : -INFINITY; break;
      }
      if (std::isinf(want)) {
        EXPECT_EQ(by_id[i], -INFINITY) << i;
      } else {
        EXPECT_NEAR(by_id[i], want, 1e-5) << i;
      }
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(by_id[id]), std::bit_cast<uint32_t>(got.token.logprob));
    // Re-scored as sampled: the same bits.
    const SampledToken again = s.score_as_sampled(in, p, id, 6);
    EXPECT_EQ(std::bit_cast<uint32_t>(again.token.logprob), std::bit_cast<uint32_t>(got.token.logprob));
    EXPECT_EQ(again.token.rank, got.token.rank);
  }
  // Greedy: the processed row is the biased, penalised logits — no temperature, no filter.
  p.temperature = 0.0f;
  SamplerInput in = input(logits);
  in.logprobs_mode = LogprobsMode::kProcessedLogits;
  const SampledToken greedy = s.sample(in, p);
  EXPECT_EQ(greedy.token.token_id, 1);
  EXPECT_EQ(greedy.token.logprob, 3.0f);
  EXPECT_EQ(greedy.top_logprobs[1].token_id, 4);
  EXPECT_EQ(greedy.top_logprobs[1].logprob, 2.75f);
}

TEST(SamplerTest, LogprobTokenIdsReportTheseIdsInOrder) {
  const std::vector<float> logits = logits_of({1.0f, 3.0f, 2.0f, -1.0f});
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 2;
  p.logprob_token_ids = std::vector<int32_t>{3, 0};
  const SampledToken got = s.sample(input(logits), p);
  EXPECT_EQ(got.token.token_id, 1);
  ASSERT_EQ(got.top_logprobs.size(), 2u);
  EXPECT_EQ(got.top_logprobs[0].token_id, 3);
  EXPECT_EQ(got.top_logprobs[0].rank, 4);
  EXPECT_EQ(got.top_logprobs[1].token_id, 0);
  EXPECT_EQ(got.top_logprobs[1].rank, 3);
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  EXPECT_NEAR(got.top_logprobs[0].logprob, -1.0 - std::log(z), 2e-6);
}

}  // namespace
}  // namespace ditto
