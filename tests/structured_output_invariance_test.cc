// Structured outputs under the contract, compared bit for bit: constrained requests (JSON Schemas,
// a regex, a choice, json_object, a Lark grammar) alone vs among unconstrained requests and
// requests of other constraints — batched, shuffled, chunked, cached, preempted, with n-gram and
// draft-model speculation, on 1 and 2 threads — through check_invariance, whose mix carries them;
// every output walked through its constraint; the negative control; speculative guesses the
// constraint forbids dropped before the forward pass; a constraint no token can satisfy ends the
// choice with finish_reason "error". The model is a generated two-layer qwen3-0.6b with the real
// Qwen3 tokenizer.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/test_model_generator.h"
#include "core/error.h"
#include "core/test_temp_dir.h"
#include "engine/invariance_check.h"
#include "engine/llm_engine.h"
#include "engine/speculative.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

bool under_sanitizer() { return std::getenv("DITTO_SANITIZER") != nullptr; }

class StructuredOutputInvarianceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    TestModelOptions o;
    o.preset = "qwen3-0.6b";
    o.out_dir = dir_->file("model");
    o.num_hidden_layers = 2;
    o.seed = 11;
    o.tokenizer_root = std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules";
    write_test_model(o);
  }
  static void TearDownTestSuite() { delete dir_; }

  static EngineArgs args() {
    EngineArgs a;
    a.model = dir_->file("model");
    a.threads = 2;
    a.kv_cache_memory = int64_t{256} << 20;
    return a;
  }
  static InvarianceCheckOptions options() {
    InvarianceCheckOptions o;
    o.num_prompts = under_sanitizer() ? 8 : 21;
    o.max_prompt_tokens = 48;
    o.max_tokens = under_sanitizer() ? 8 : 16;
    return o;
  }
  static std::string prompt_text(const std::string& user) {
    return "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  }

  static testing::TempDir* dir_;
};
testing::TempDir* StructuredOutputInvarianceTest::dir_ = nullptr;

TEST_F(StructuredOutputInvarianceTest, EveryContractRowHoldsWithConstrainedRequestsInTheMix) {
  const std::vector<InvarianceRow> rows = check_invariance(args(), options());
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].name, "structured outputs: each output satisfies its constraint");
  EXPECT_GE(rows[0].cases, under_sanitizer() ? 2 : 7);  // n = 2 and n = 3 cases count each choice
  EXPECT_GT(rows[0].tokens, rows[0].cases);
  bool speculative = false;
  for (const InvarianceRow& r : rows) {
    EXPECT_EQ(r.mismatches, 0) << r.name << " (" << r.note << ")";
    EXPECT_GT(r.cases, 0) << r.name;
    speculative = speculative || r.spec_decode_num_draft_tokens > 0;
  }
  EXPECT_TRUE(speculative);
}

TEST_F(StructuredOutputInvarianceTest, TheNegativeControlIsCaught) {
  InvarianceCheckOptions o = options();
  o.num_prompts = 4;
  o.max_tokens = 6;
  o.inject_batch_size_fault = true;
  int64_t mismatches = 0;
  for (const InvarianceRow& r : check_invariance(args(), o)) mismatches += r.mismatches;
  EXPECT_GT(mismatches, 0);
}

TEST_F(StructuredOutputInvarianceTest, ConstrainedOutputsAreValidAndAloneEqualsBatched) {
  LLMEngine llm(args());
  std::vector<PromptInput> prompts;
  std::vector<SamplingParams> params;
  for (int64_t k = 0; k < 12; ++k) {
    prompts.push_back(PromptInput{.text = prompt_text("Answer number " + std::to_string(k))});
    SamplingParams p;
    p.max_tokens = 40;
    p.temperature = k % 3 == 0 ? 0.0f : 0.9f;
    p.seed = 100 + static_cast<uint64_t>(k);
    p.logprobs = 2;
    if (k % 2 == 0) p.structured_outputs = contract_structured_outputs(k / 2);
    params.push_back(p);
  }
  std::vector<GenerateResult> together = llm.generate(prompts, params);
  for (size_t i = 0; i < prompts.size(); ++i) {
    llm.reset_prefix_cache();
    const GenerateResult alone = llm.generate({prompts[i]}, {params[i]})[0];
    ASSERT_FALSE(alone.error) << *alone.error;
    const CompletionOutput& a = alone.output.outputs[0];
    const CompletionOutput& b = together[i].output.outputs[0];
    EXPECT_EQ(a.token_ids, b.token_ids) << i;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
    for (size_t t = 0; t < a.logprobs.size(); ++t)
      EXPECT_EQ(std::bit_cast<uint32_t>(a.logprobs[t].token.logprob),
                std::bit_cast<uint32_t>(b.logprobs[t].token.logprob));
    if (!params[i].structured_outputs) continue;
    const StructuredOutputsParams& so = *params[i].structured_outputs;
    EXPECT_NE(a.finish_reason, "error") << i;
    if (a.finish_reason != "stop") continue;  // cut by max_tokens: a prefix
    if (so.choice) {
      EXPECT_NE(std::find(so.choice->begin(), so.choice->end(), a.text), so.choice->end()) << a.text;
    } else if (so.json || so.json_object) {
      EXPECT_TRUE(nlohmann::json::accept(a.text)) << a.text;
    }
  }
}

// Proposes what plain decoding will sample next (the baseline), with `forbidden` in place of the
// third guess of each run: the engine must drop it and everything after it before the forward pass.
class OracleWithForbiddenGuess : public Proposer {
 public:
  OracleWithForbiddenGuess(std::vector<int32_t> baseline, int32_t forbidden)
      : baseline_(std::move(baseline)), forbidden_(forbidden) {}
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) override {
    proposals.assign(requests.size(), {});
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto done = static_cast<size_t>(requests[i].seq->num_output_tokens());
      for (size_t k = 0; k < static_cast<size_t>(requests[i].max_tokens) && done + k < baseline_.size(); ++k)
        proposals[i].push_back(k == 2 ? forbidden_ : baseline_[done + k]);
      asked_ += static_cast<int64_t>(proposals[i].size());
    }
  }
  int64_t asked() const { return asked_; }

 private:
  std::vector<int32_t> baseline_;
  int32_t forbidden_;
  int64_t asked_ = 0;
};

TEST_F(StructuredOutputInvarianceTest, GuessesTheConstraintForbidsAreDroppedAndTheOutputIsUnchanged) {
  LLMEngine llm(args());
  SamplingParams p;
  p.temperature = 0.8f;
  p.seed = 3;
  p.max_tokens = 24;
  p.logprobs = 1;
  p.structured_outputs = StructuredOutputsParams{};
  p.structured_outputs->regex = "[0-9]{20}";  // Qwen3 writes one digit per token: 20 tokens
  const PromptInput prompt{.text = prompt_text("Count.")};
  const GenerateResult want = llm.generate({prompt}, {p})[0];
  const CompletionOutput& w = want.output.outputs[0];
  ASSERT_GE(w.token_ids.size(), 6u) << w.text;
  EngineConfig config;
  config.num_kv_blocks = 64;
  config.speculative.num_speculative_tokens = 4;
  const int32_t letter = llm.tokenizer().encode("Q", false)[0];  // never allowed by the regex
  auto oracle = std::make_shared<OracleWithForbiddenGuess>(w.token_ids, letter);
  config.proposer = oracle;
  Engine engine(llm.model(), &llm.tokenizer(), llm.eos_token_ids(), config);
  EngineRequest r = llm.input_processor().process(prompt, p, MaxTokensRule::kClipToContext);
  r.request_id = "spec";
  engine.add(std::move(r));
  std::vector<RequestOutput> done;
  while (engine.has_unfinished())
    for (RequestOutput& o : engine.step()) done.push_back(std::move(o));
  ASSERT_EQ(done.size(), 1u);
  const CompletionOutput& g = done[0].outputs[0];
  EXPECT_EQ(g.token_ids, w.token_ids);
  ASSERT_EQ(g.logprobs.size(), w.logprobs.size());
  for (size_t t = 0; t < g.logprobs.size(); ++t)
    EXPECT_EQ(std::bit_cast<uint32_t>(g.logprobs[t].token.logprob),
              std::bit_cast<uint32_t>(w.logprobs[t].token.logprob));
  // Runs of up to 4 guesses were offered; at most the 2 before the forbidden one were verified, all kept.
  const SpeculationStats& s = engine.speculation_stats();
  EXPECT_GT(oracle->asked(), s.num_draft_tokens);
  EXPECT_LE(s.num_draft_tokens, 2 * s.num_drafts);
  EXPECT_EQ(s.num_accepted_tokens, s.num_draft_tokens);
  EXPECT_GT(s.num_accepted_tokens, 0);
}

TEST_F(StructuredOutputInvarianceTest, AConstraintNoTokenCanSatisfyEndsWithFinishReasonError) {
  LLMEngine llm(args());
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 10;
  p.structured_outputs = StructuredOutputsParams{};
  p.structured_outputs->choice = std::vector<std::string>{"A"};
  const PromptInput prompt{.text = prompt_text("Pick.")};
  const GenerateResult ok = llm.generate({prompt}, {p})[0];
  EXPECT_EQ(ok.output.outputs[0].finish_reason, "stop");  // the choice complete ends it, without EOS
  EXPECT_EQ(ok.output.outputs[0].text, "A");
  // allowed_token_ids leaves only "B", which the constraint never allows: the choice ends at once,
  // without the refused token.
  p.allowed_token_ids = llm.tokenizer().encode("B", false);
  const GenerateResult r = llm.generate({prompt}, {p})[0];
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.output.outputs[0].finish_reason, "error");
  EXPECT_TRUE(r.output.outputs[0].token_ids.empty());
  ASSERT_TRUE(r.output.outputs[0].finish_message);
  EXPECT_EQ(r.output.outputs[0].finish_message->rfind("structured output: ", 0), 0u)
      << *r.output.outputs[0].finish_message;
  EXPECT_EQ(r.output.outputs[0].finish_message->find('\n'), std::string::npos);
  // The choice complete: nothing may follow, even before min_tokens (the constraint ends it).
  p.allowed_token_ids.reset();
  p.min_tokens = 5;
  EXPECT_EQ(llm.generate({prompt}, {p})[0].output.outputs[0].finish_reason, "stop");
}

TEST_F(StructuredOutputInvarianceTest, ABadConstraintIsRefusedAloneAndTheOthersComplete) {
  LLMEngine llm(args());
  SamplingParams good;
  good.max_tokens = 4;
  good.temperature = 0.0f;
  SamplingParams bad = good;
  bad.structured_outputs = StructuredOutputsParams{};
  bad.structured_outputs->regex = "([a-z";
  const std::vector<GenerateResult> r =
      llm.generate({PromptInput{.text = "a"}, PromptInput{.text = "b"}, PromptInput{.text = "c"}}, {good, bad, good});
  EXPECT_FALSE(r[0].error);
  ASSERT_TRUE(r[1].error);
  EXPECT_NE(r[1].error->find("structured_outputs.regex"), std::string::npos) << *r[1].error;
  EXPECT_FALSE(r[2].error);
  EXPECT_EQ(r[2].output.outputs[0].token_ids.size(), 4u);
}

}  // namespace
}  // namespace ditto
