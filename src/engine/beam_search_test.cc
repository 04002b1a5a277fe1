#include "engine/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/error.h"

namespace ditto {
namespace {

// A toy model over 5 tokens whose next-token log-probabilities depend on the last token only:
// row[last][next] (each row a distribution). Token 4 is EOS.
const double kRows[5][5] = {
    {std::log(0.10), std::log(0.50), std::log(0.25), std::log(0.10), std::log(0.05)},
    {std::log(0.05), std::log(0.05), std::log(0.30), std::log(0.20), std::log(0.40)},
    {std::log(0.45), std::log(0.05), std::log(0.05), std::log(0.40), std::log(0.05)},
    {std::log(0.20), std::log(0.20), std::log(0.20), std::log(0.20), std::log(0.20)},
    {std::log(0.20), std::log(0.20), std::log(0.20), std::log(0.20), std::log(0.20)},
};

// The step of a greedy engine over the toy model: the argmax token (ties to the lower id) and the
// top `n` entries by (logprob desc, id asc).
BeamStepFn toy_step(int64_t n, int* calls = nullptr) {
  return [n, calls](const std::vector<BeamStepRequest>& requests) {
    if (calls) ++*calls;
    std::vector<std::optional<SampledToken>> out;
    for (const BeamStepRequest& r : requests) {
      const int32_t last = r.tokens->back();
      std::vector<TokenLogprob> all;
      for (int32_t id = 0; id < 5; ++id) all.push_back({id, static_cast<float>(kRows[last][id]), 0, "", ""});
      std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.logprob > b.logprob; });
      for (size_t k = 0; k < all.size(); ++k) all[k].rank = static_cast<int64_t>(k) + 1;
      SampledToken s;
      s.token = all[0];
      s.top_logprobs.assign(all.begin(), all.begin() + std::min<int64_t>(n, 5));
      out.emplace_back(std::move(s));
    }
    return out;
  };
}

TEST(BeamSearchTest, WidthOneIsTheGreedyPath) {
  BeamSearchParams p;
  p.beam_width = 1;
  p.max_tokens = 4;
  p.ignore_eos = true;
  const auto out = run_beam_search({{0}}, p, {4}, 0, toy_step(2));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].sequences.size(), 1u);
  // 0 → 1 (0.5) → 4 (0.4) → 0 (0.2, ties to the lower id) → 1 (0.5)
  EXPECT_EQ(out[0].sequences[0].tokens, (std::vector<int32_t>{0, 1, 4, 0, 1}));
  EXPECT_EQ(out[0].sequences[0].finish_reason, "length");
}

// Two steps from token 0 at width 2, by hand: step 1 keeps 0→1 (0.5) and 0→2 (0.25); step 2's
// candidates are 1→{4: .4, 2: .3, 3: .2, ...} and 2→{0: .45, 3: .4, ...}: 0·1·4 = .20 ends in EOS
// (completed), the live ones by score are 0·1·2 (.15), 0·1·3 (.10), 0·2·0 (.1125)… keeping 0·1·2
// and 0·2·0; the final list is EOS beam (scored over 2 tokens) and the two live beams.
TEST(BeamSearchTest, TwoStepsByHandWithEosAndLengthPenalty) {
  BeamSearchParams p;
  p.beam_width = 2;
  p.max_tokens = 2;
  p.length_penalty = 1.0f;
  const auto out = run_beam_search({{0}}, p, {4}, 0, toy_step(4));
  const auto& seqs = out[0].sequences;
  ASSERT_EQ(seqs.size(), 2u);
  auto cum = [](std::initializer_list<std::pair<int, int>> steps) {
    double c = 0.0;
    for (auto [a, b] : steps) c += static_cast<double>(static_cast<float>(kRows[a][b]));
    return c;
  };
  // Scores: EOS beam log(.2)/2 (EOS not counted: length 2) = -0.80; 0·1·2: log(.15)/3 = -0.63;
  // 0·2·0: log(.1125)/3 = -0.73.
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(seqs[1].tokens, (std::vector<int32_t>{0, 2, 0}));
  EXPECT_DOUBLE_EQ(seqs[0].cum_logprob, cum({{0, 1}, {1, 2}}));
  EXPECT_DOUBLE_EQ(seqs[0].score, seqs[0].cum_logprob / 3.0);
  EXPECT_EQ(seqs[0].logprobs.size(), 2u);
  EXPECT_EQ(seqs[0].logprobs[1].token.token_id, 2);
  // A length penalty of 0 compares cumulative logprobs: the EOS beam (log .2) wins.
  p.length_penalty = 0.0f;
  const auto flat = run_beam_search({{0}}, p, {4}, 0, toy_step(4));
  EXPECT_EQ(flat[0].sequences[0].tokens, (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(flat[0].sequences[0].finish_reason, "stop");
  EXPECT_DOUBLE_EQ(flat[0].sequences[0].score, cum({{0, 1}, {1, 4}}));
}

TEST(BeamSearchTest, EachPromptsBeamsAreTheSameAloneOrTogether) {
  BeamSearchParams p;
  p.beam_width = 3;
  p.max_tokens = 5;
  int calls = 0;
  const auto together = run_beam_search({{0}, {2}, {3, 1}}, p, {4}, 7, toy_step(6, &calls));
  EXPECT_LE(calls, 5);  // one step call per token position for all prompts together
  const std::vector<std::vector<int32_t>> prompts = {{0}, {2}, {3, 1}};
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto alone = run_beam_search({prompts[i]}, p, {4}, 7, toy_step(6));
    ASSERT_EQ(alone[0].sequences.size(), together[i].sequences.size());
    for (size_t k = 0; k < alone[0].sequences.size(); ++k) {
      EXPECT_EQ(alone[0].sequences[k].tokens, together[i].sequences[k].tokens);
      EXPECT_EQ(alone[0].sequences[k].cum_logprob, together[i].sequences[k].cum_logprob);
    }
  }
}

TEST(BeamSearchTest, ParamsAreCheckedByName) {
  auto error_param = [](BeamSearchParams p) {
    try {
      p.validate(20);
    } catch (const Error& e) {
      return e.param();
    }
    return std::string();
  };
  BeamSearchParams p;
  p.beam_width = 11;  // 22 logprobs > max_logprobs 20
  EXPECT_EQ(error_param(p), "beam_width");
  p.beam_width = 0;
  EXPECT_EQ(error_param(p), "beam_width");
  p.beam_width = 2;
  p.max_tokens = 0;
  EXPECT_EQ(error_param(p), "max_tokens");
  p.max_tokens = 3;
  p.temperature = -1.0f;
  EXPECT_EQ(error_param(p), "temperature");
  p.temperature = 0.0f;
  EXPECT_EQ(error_param(p), "");
}

}  // namespace
}  // namespace ditto
