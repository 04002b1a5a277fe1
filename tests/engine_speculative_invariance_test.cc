// Speculative decoding under the engine's contract: with any proposer (an oracle, random guesses,
// the n-gram lookup, a draft model) a request's tokens and logprobs are the bits it gets with
// speculation off, alone or in any batch.
#include "engine_invariance_fixture.h"

namespace ditto::engine_invariance {
namespace {

// Guesses at random: nothing it proposes may change a bit.
class RandomProposer : public Proposer {
 public:
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) override {
    proposals.assign(requests.size(), {});
    for (size_t i = 0; i < requests.size(); ++i)
      for (int64_t j = 0; j < requests[i].max_tokens; ++j) proposals[i].push_back(static_cast<int32_t>(rng_() % 300));
  }

 private:
  std::mt19937 rng_{17};
};

// Speculative decoding on vs off: with every proposer (prompt lookup, a draft model, one that knows
// the answers but lies at times, one that guesses at random), mixed with the other requests'
// prefills and decodes, under small token budgets, preemption and prefix-cache hits, the outputs —
// tokens, logprobs, prompt logprobs, cumulative logprobs, finish reasons — are the baseline's bits.
TEST_F(EngineInvarianceTest, SpeculativeDecodingOnVsOff) {
  RunOptions o;
  o.speculative.method = "ngram";
  o.speculative.num_speculative_tokens = 4;
  o.speculative.prompt_lookup_min = 1;
  o.speculative.prompt_lookup_max = 3;
  const RunResult ngram = run(*model2_, *cases_, identity(), o, 2);
  expect_baseline(ngram, "ngram, k 4");
  EXPECT_GT(ngram.speculation.num_draft_tokens, 0);
  EXPECT_GT(ngram.speculation.num_accepted_tokens, 0);  // a random model's greedy loops get copied
  EXPECT_LT(ngram.speculation.num_accepted_tokens, ngram.speculation.num_draft_tokens);
  o.max_num_batched_tokens = 16;  // guesses share a step with chunked prefills and get cut
  expect_baseline(run(*model2_, *cases_, identity(), o, 3), "ngram, budget 16");
  o.max_num_batched_tokens = 8192;
  o.speculative.disable_by_batch_size = 2;  // off while two or more run: only the last one guesses
  const RunResult batch_off = run(*model2_, *cases_, identity(), o);
  expect_baseline(batch_off, "ngram, disable_by_batch_size 2");
  EXPECT_LT(batch_off.speculation.num_draft_tokens, ngram.speculation.num_draft_tokens);
  o.speculative.disable_by_batch_size = 1;
  EXPECT_EQ(run(*model2_, *cases_, identity(), o).speculation.num_draft_tokens, 0);

  RunOptions oracle;
  oracle.speculative.num_speculative_tokens = 5;
  oracle.proposer = std::make_shared<OracleProposer>(*cases_, *baseline_, 4);
  const RunResult told = run(*model2_, *cases_, identity(), oracle, 2);
  expect_baseline(told, "oracle, every 4th guess wrong");
  EXPECT_GT(told.speculation.acceptance_rate(), 0.5);
  EXPECT_LT(told.speculation.acceptance_rate(), 0.9);
  oracle.proposer = std::make_shared<OracleProposer>(*cases_, *baseline_, 0);
  oracle.num_blocks = 7;  // preemption and recomputation with guesses in flight
  const RunResult preempted = run(*model2_, *cases_, identity(), oracle);
  EXPECT_GT(preempted.preemptions, 0);
  expect_baseline(preempted, "oracle, never wrong, 7 KV blocks");
  EXPECT_GT(preempted.speculation.acceptance_rate(), 0.9);
  oracle.num_blocks = 256;
  const RunResult twice = run(*model2_, *cases_, identity(), oracle, 1000, 2);
  EXPECT_GT(twice.prefix_hit_tokens, 40);
  expect_baseline(twice, "oracle, prefix cache warm (second pass)");

  RunOptions random;
  random.speculative.num_speculative_tokens = 3;
  random.proposer = std::make_shared<RandomProposer>();
  const RunResult guessed = run(*model2_, *cases_, identity(), random, 2);
  expect_baseline(guessed, "random guesses");
  EXPECT_GT(guessed.speculation.num_draft_tokens, 0);
}

// A draft model (the same tiny model, so greedy guesses are mostly right, and a Llama of another
// architecture and weights, so most are wrong) in the engine with its own KV cache.
TEST_F(EngineInvarianceTest, SpeculativeDecodingWithADraftModel) {
  RunOptions o;
  o.speculative.method = "draft_model";
  o.speculative.model = "(loaded by the test)";
  o.speculative.num_speculative_tokens = 3;
  o.draft = model1_;
  const RunResult self = run(*model2_, *cases_, identity(), o, 2);
  expect_baseline(self, "the model as its own draft");
  EXPECT_GT(self.speculation.num_accepted_tokens, 0);
  // Greedy requests without min_tokens: the draft's greedy guesses are the model's tokens.
  std::vector<size_t> greedy;
  for (size_t i = 0; i < cases_->size(); ++i)
    if ((*cases_)[i].params.temperature == 0.0f && (*cases_)[i].params.min_tokens == 0) greedy.push_back(i);
  ASSERT_FALSE(greedy.empty());
  const RunResult exact = run(*model2_, *cases_, greedy, o);
  EXPECT_EQ(exact.speculation.num_accepted_tokens, exact.speculation.num_draft_tokens);
  EXPECT_GT(exact.speculation.num_draft_tokens, 4);
  TempDir other;
  write_tiny_model(other, "llama");
  const std::unique_ptr<CausalLM> llama = CausalLM::load(other.path().string(), pool2_);
  o.draft = llama.get();
  o.max_num_batched_tokens = 16;
  o.num_blocks = 12;
  const RunResult r = run(*model2_, *cases_, identity(), o, 3);
  expect_baseline(r, "a Llama draft, budget 16, 12 KV blocks");
  EXPECT_GT(r.speculation.num_draft_tokens, 0);
  // A draft with a shorter context than the model (48 positions; prompts reach 70 + outputs):
  // past its context it stops guessing, nothing fails.
  TempDir short_context;
  write_tiny_model(short_context, "qwen3", nullptr, [](nlohmann::json& c) { c["max_position_embeddings"] = 48; });
  const std::unique_ptr<CausalLM> short_draft = CausalLM::load(short_context.path().string(), pool2_);
  RunOptions s;
  s.speculative = o.speculative;
  s.draft = short_draft.get();
  const RunResult shorter = run(*model2_, *cases_, identity(), s, 2);
  expect_baseline(shorter, "a draft with a 48-token context");
  EXPECT_GT(shorter.speculation.num_draft_tokens, 0);
}

}  // namespace
}  // namespace ditto::engine_invariance
