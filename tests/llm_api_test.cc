// The public C++ API (include/ditto/) as a program uses it: the streaming call gives the same bits
// as generate() (reports appended, compared with memcmp), the tokenizer calls go through the same
// front door, and malformed chat JSON is refused naming its field. The model is a generated
// one-layer qwen3-0.6b with the real Qwen3 tokenizer; only its set-up uses internal headers.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/test_model_generator.h"
#include "core/test_temp_dir.h"
#include "ditto/llm.h"

namespace ditto {
namespace {

class LlmApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    TestModelOptions o;
    o.preset = "qwen3-0.6b";
    o.out_dir = dir_->file("model");
    o.num_hidden_layers = 1;
    o.seed = 3;
    o.tokenizer_root = std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules";
    write_test_model(o);
    EngineArgs args;
    args.model = o.out_dir;
    args.threads = 2;
    llm_ = new LLM(args);
  }
  static void TearDownTestSuite() {
    delete llm_;
    delete dir_;
  }
  static testing::TempDir* dir_;
  static LLM* llm_;

  static std::vector<PromptInput> prompts() {
    std::vector<PromptInput> p(3);
    p[0].text = "The future of AI is";
    p[1].messages = R"([{"role": "user", "content": "Name three rivers."}])";
    p[1].chat_template_kwargs = R"({"enable_thinking": false})";
    p[2].token_ids = std::vector<int32_t>{785, 3974, 13876, 38835};
    return p;
  }
  static SamplingParams params() {
    SamplingParams s;
    s.temperature = 0.8f;
    s.top_p = 0.95f;
    s.n = 2;
    s.max_tokens = 9;
    s.logprobs = 2;
    s.seed = 11;
    return s;
  }
};
testing::TempDir* LlmApiTest::dir_ = nullptr;
LLM* LlmApiTest::llm_ = nullptr;

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

void expect_same_bits(const TokenLogprob& a, const TokenLogprob& b) {
  EXPECT_EQ(a.token_id, b.token_id);
  EXPECT_TRUE(same_bits(a.logprob, b.logprob)) << a.logprob << " vs " << b.logprob;
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.decoded_token, b.decoded_token);
  EXPECT_EQ(a.bytes, b.bytes);
}

void expect_same_bits(const RequestOutput& a, const RequestOutput& b) {
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.prompt_token_ids, b.prompt_token_ids);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_TRUE(a.finished && b.finished);
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t c = 0; c < a.outputs.size(); ++c) {
    const CompletionOutput& x = a.outputs[c];
    const CompletionOutput& y = b.outputs[c];
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.text, y.text);
    EXPECT_EQ(x.token_ids, y.token_ids);
    EXPECT_EQ(x.finish_reason, y.finish_reason);
    EXPECT_EQ(std::bit_cast<uint64_t>(x.cumulative_logprob), std::bit_cast<uint64_t>(y.cumulative_logprob));
    ASSERT_EQ(x.logprobs.size(), y.logprobs.size());
    for (size_t t = 0; t < x.logprobs.size(); ++t) {
      expect_same_bits(x.logprobs[t].token, y.logprobs[t].token);
      ASSERT_EQ(x.logprobs[t].top_logprobs.size(), y.logprobs[t].top_logprobs.size());
      for (size_t k = 0; k < x.logprobs[t].top_logprobs.size(); ++k)
        expect_same_bits(x.logprobs[t].top_logprobs[k], y.logprobs[t].top_logprobs[k]);
    }
  }
}

TEST_F(LlmApiTest, StreamingGivesTheSameBitsAsGenerate) {
  const std::vector<GenerateResult> whole = llm_->generate(prompts(), {params()});
  std::map<size_t, std::vector<RequestOutput>> reports;
  const std::vector<GenerateResult> streamed = llm_->generate_stream(
      prompts(), {params()}, [&](size_t index, const RequestOutput& delta) { reports[index].push_back(delta); });
  ASSERT_EQ(whole.size(), 3u);
  ASSERT_EQ(streamed.size(), 3u);
  for (size_t i = 0; i < whole.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    ASSERT_FALSE(whole[i].error) << *whole[i].error;
    ASSERT_FALSE(streamed[i].error) << *streamed[i].error;
    expect_same_bits(whole[i].output, streamed[i].output);
    // Several reports per prompt, only the last finished, and their tokens add up to the output.
    const std::vector<RequestOutput>& r = reports[i];
    ASSERT_GT(r.size(), 1u);
    size_t tokens = 0;
    for (size_t k = 0; k < r.size(); ++k) {
      EXPECT_EQ(r[k].finished, k + 1 == r.size());
      for (const CompletionOutput& c : r[k].outputs) tokens += c.token_ids.size();
    }
    size_t expected = 0;
    for (const CompletionOutput& c : whole[i].output.outputs) expected += c.token_ids.size();
    EXPECT_EQ(tokens, expected);
  }
}

TEST_F(LlmApiTest, TokenizerCallsGoThroughTheFrontDoor) {
  const PromptInput text{.text = "Hello, wörld!", .add_special_tokens = false};
  const std::vector<int32_t> ids = llm_->tokenize(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(llm_->detokenize(ids), "Hello, wörld!");

  PromptInput chat = prompts()[1];
  const std::string rendered = llm_->render_chat(chat);
  EXPECT_NE(rendered.find("Name three rivers."), std::string::npos);
  const PromptInput as_text{.text = rendered, .add_special_tokens = false};  // a rendered chat holds its own
  EXPECT_EQ(llm_->tokenize(chat), llm_->tokenize(as_text));
  // The chat's tokens are what generate() ran.
  const std::vector<GenerateResult> r = llm_->generate({chat}, {params()});
  ASSERT_FALSE(r[0].error);
  EXPECT_EQ(r[0].output.prompt_token_ids, llm_->tokenize(chat));
  // Special tokens kept or skipped.
  const std::vector<int32_t> chat_ids = llm_->tokenize(chat);
  EXPECT_NE(llm_->detokenize(chat_ids, /*skip_special_tokens=*/false).find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(llm_->detokenize(chat_ids, /*skip_special_tokens=*/true).find("<|im_start|>"), std::string::npos);
}

TEST_F(LlmApiTest, MalformedChatJsonIsRefusedNamingTheField) {
  auto param_of = [&](const PromptInput& p) -> std::string {
    try {
      llm_->tokenize(p);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      return e.param();
    }
    ADD_FAILURE() << "no error";
    return "";
  };
  PromptInput p = prompts()[1];
  p.messages = R"([{"role": "user", "content": "hi"})";  // unclosed
  EXPECT_EQ(param_of(p), "messages");
  p = prompts()[1];
  p.tools = "[{";
  EXPECT_EQ(param_of(p), "tools");
  p.tools = R"({"type": "function"})";  // an object, not an array
  EXPECT_EQ(param_of(p), "tools");
  p = prompts()[1];
  p.chat_template_kwargs = "[1]";
  EXPECT_EQ(param_of(p), "chat_template_kwargs");
  // In a batch the bad prompt is that result's error; the others run.
  std::vector<PromptInput> batch = prompts();
  batch[1].messages = "not json";
  const std::vector<GenerateResult> r = llm_->generate(batch, {params()});
  EXPECT_FALSE(r[0].error);
  ASSERT_TRUE(r[1].error);
  EXPECT_NE(r[1].error->find("messages"), std::string::npos) << *r[1].error;
  EXPECT_FALSE(r[2].error);
}

TEST_F(LlmApiTest, ScoreGivesThePromptLogprobsOfGenerateInSequenceOrder) {
  const std::vector<std::vector<int32_t>> seqs = {
      {785, 3974, 13876, 38835, 374, 264}, {9707, 11, 1879}, {785, 3974, 13876, 38835, 374, 1}};
  std::vector<size_t> order;
  std::vector<RequestOutput> scored(seqs.size());
  llm_->score(seqs, ScoreOptions{.top_logprobs = 3, .next_token = false}, [&](size_t i, RequestOutput&& out) {
    order.push_back(i);
    scored[i] = std::move(out);
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2}));
  for (size_t i = 0; i < seqs.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    // The same bits as a greedy one-token request with prompt_logprobs = 3, run alone.
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = 1;
    p.prompt_logprobs = 3;
    const std::vector<GenerateResult> alone = llm_->generate({PromptInput{.token_ids = seqs[i]}}, {p});
    ASSERT_FALSE(alone[0].error) << *alone[0].error;
    const RequestOutput& want = alone[0].output;
    EXPECT_EQ(scored[i].prompt_token_ids, seqs[i]);
    ASSERT_EQ(scored[i].prompt_logprobs.size(), seqs[i].size());
    EXPECT_FALSE(scored[i].prompt_logprobs[0]);
    for (size_t t = 1; t < seqs[i].size(); ++t) {
      ASSERT_TRUE(scored[i].prompt_logprobs[t]);
      const SampledToken& got = *scored[i].prompt_logprobs[t];
      EXPECT_EQ(got.token.token_id, seqs[i][t]);
      expect_same_bits(got.token, want.prompt_logprobs[t]->token);
      ASSERT_EQ(got.top_logprobs.size(), 3u);
      for (size_t k = 0; k < 3; ++k) expect_same_bits(got.top_logprobs[k], want.prompt_logprobs[t]->top_logprobs[k]);
    }
  }
  // Sequences 0 and 2 share five tokens: their first four scores are the same bits.
  for (size_t t = 1; t < 5; ++t)
    expect_same_bits(scored[0].prompt_logprobs[t]->token, scored[2].prompt_logprobs[t]->token);
}

TEST_F(LlmApiTest, ScoreWholeRowsAreDistributionsAndLeaveTheEngineArgsAlone) {
  const EngineArgs before = llm_->args();
  const int64_t vocab = llm_->model_info().vocab_size;
  const std::vector<std::vector<int32_t>> seqs = {{785, 3974, 13876}, {9707}};
  std::vector<RequestOutput> scored(seqs.size());
  llm_->score(seqs, ScoreOptions{.top_logprobs = -1, .next_token = true},
              [&](size_t i, RequestOutput&& out) { scored[i] = std::move(out); });
  for (size_t i = 0; i < seqs.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    std::vector<const SampledToken*> rows;
    for (size_t t = 1; t < seqs[i].size(); ++t) rows.push_back(&*scored[i].prompt_logprobs[t]);
    ASSERT_EQ(scored[i].outputs.size(), 1u);
    ASSERT_EQ(scored[i].outputs[0].logprobs.size(), 1u);
    rows.push_back(&scored[i].outputs[0].logprobs[0]);
    for (const SampledToken* row : rows) {
      ASSERT_EQ(static_cast<int64_t>(row->top_logprobs.size()), vocab);
      // Every id once; the probabilities sum to 1 (float32 log-softmax, summed in double: 1e-4).
      std::vector<bool> seen(static_cast<size_t>(vocab), false);
      double sum = 0.0;
      for (const TokenLogprob& e : row->top_logprobs) {
        ASSERT_FALSE(seen[static_cast<size_t>(e.token_id)]);
        seen[static_cast<size_t>(e.token_id)] = true;
        sum += std::exp(static_cast<double>(e.logprob));
        if (e.token_id == row->token.token_id) {
          EXPECT_TRUE(same_bits(e.logprob, row->token.logprob));
        }
      }
      EXPECT_NEAR(sum, 1.0, 1e-4);
      EXPECT_EQ(row->top_logprobs[0].rank, 1);
    }
  }
  EXPECT_EQ(llm_->args().max_num_seqs, before.max_num_seqs);
  EXPECT_EQ(llm_->args().max_logprobs, before.max_logprobs);
  EXPECT_EQ(llm_->args().max_num_batched_tokens, before.max_num_batched_tokens);
}

TEST_F(LlmApiTest, ScoreRefusesABadSequenceBeforeAnyOutput) {
  auto refusal = [&](const std::vector<std::vector<int32_t>>& seqs, ScoreOptions o) -> std::string {
    size_t outputs = 0;
    try {
      llm_->score(seqs, o, [&](size_t, RequestOutput&&) { ++outputs; });
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_EQ(outputs, 0u);
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  };
  const ScoreOptions top1{.top_logprobs = 1, .next_token = false};
  EXPECT_NE(refusal({{1, 2}, {7}}, top1).find("sequence 1 has 1 token"), std::string::npos);
  const std::string oov = refusal({{1, 2}, {1, 2}, {3, static_cast<int32_t>(llm_->model_info().vocab_size)}}, top1);
  EXPECT_EQ(oov.rfind("sequence 2: ", 0), 0u) << oov;
  const std::string context =
      refusal({std::vector<int32_t>(static_cast<size_t>(llm_->model_info().max_model_len), 5)}, top1);
  EXPECT_NE(context.find("max_position_embeddings"), std::string::npos) << context;
  EXPECT_NE(refusal({{1, 2}}, ScoreOptions{.top_logprobs = 0, .next_token = false}).find("top_logprobs"),
            std::string::npos);
}

TEST_F(LlmApiTest, GenerateOptionsSetIdsRulesAndAbort) {
  std::vector<PromptInput> batch = prompts();
  GenerateOptions o;
  o.request_ids = {"a", "b", "c"};
  o.max_tokens_rules.assign(3, MaxTokensRule::kAsGiven);
  std::vector<size_t> seen;
  o.on_result = [&](size_t i, GenerateResult& r) {
    seen.push_back(i);
    EXPECT_EQ(r.output.request_id, o.request_ids[i]);
  };
  o.return_outputs = false;
  const std::vector<GenerateResult> r = llm_->generate(batch, {params()}, o);
  EXPECT_EQ(seen.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r[i].output.request_id, o.request_ids[i]);
    EXPECT_TRUE(r[i].output.outputs.empty());  // handed to on_result only
  }
  // A rule or an id per prompt, or none.
  o.request_ids = {"a"};
  EXPECT_THROW(llm_->generate(batch, {params()}, o), Error);
  o.request_ids.clear();
  o.max_tokens_rules = {MaxTokensRule::kAsGiven};
  EXPECT_THROW(llm_->generate(batch, {params()}, o), Error);
  // kAsGiven refuses what kClipToContext cuts.
  SamplingParams big = params();
  big.max_tokens = llm_->model_info().max_model_len;
  GenerateOptions as_given;
  as_given.max_tokens_rules.assign(3, MaxTokensRule::kAsGiven);
  EXPECT_TRUE(llm_->generate(batch, {big}, as_given)[0].error);
  big.max_tokens = 4;  // keep the clipped run short
  EXPECT_FALSE(llm_->generate(batch, {big})[0].error);
  // on_step returning false aborts every request.
  GenerateOptions stop;
  int steps = 0;
  stop.on_step = [&](const GenerateProgress& at) {
    EXPECT_EQ(at.total, 3u);
    return ++steps < 2;
  };
  for (const GenerateResult& g : llm_->generate(batch, {params()}, stop)) {
    ASSERT_FALSE(g.error);
    for (const CompletionOutput& c : g.output.outputs) EXPECT_EQ(c.finish_reason, "abort");
  }
}

// The LLM keeps its engine between generate() calls, as vLLM's does: the second call with a long
// prompt finds its full blocks in the prefix cache and gives the same bits; reset_prefix_cache()
// empties the cache (refusing while requests run), and so does a call under other engine limits.
TEST_F(LlmApiTest, PrefixCacheCarriesAcrossGenerateCalls) {
  ASSERT_TRUE(llm_->reset_prefix_cache());
  std::vector<PromptInput> p(1);
  p[0].token_ids = std::vector<int32_t>{};
  for (int32_t i = 0; i < 50; ++i) p[0].token_ids->push_back(1000 + 37 * i);
  SamplingParams s = params();
  s.n = 1;
  const std::vector<GenerateResult> first = llm_->generate(p, {s});
  ASSERT_FALSE(first[0].error) << *first[0].error;
  EXPECT_EQ(first[0].output.num_cached_tokens, 0);
  const std::vector<GenerateResult> second = llm_->generate(p, {s});
  EXPECT_EQ(second[0].output.num_cached_tokens, 48);    // three full blocks of 16
  EXPECT_EQ(llm_->last_stats().prefix_hit_tokens, 48);  // this call's hits, not the engine's total
  expect_same_bits(first[0].output, second[0].output);

  EXPECT_TRUE(llm_->reset_prefix_cache());
  const std::vector<GenerateResult> third = llm_->generate(p, {s});
  EXPECT_EQ(third[0].output.num_cached_tokens, 0);
  expect_same_bits(first[0].output, third[0].output);

  // score() runs under limits of its own: a new engine, and generate() finds an empty cache after.
  llm_->score({{1, 2, 3}}, ScoreOptions{}, [](size_t, RequestOutput&&) {});
  const std::vector<GenerateResult> fourth = llm_->generate(p, {s});
  EXPECT_EQ(fourth[0].output.num_cached_tokens, 0);
  expect_same_bits(first[0].output, fourth[0].output);

  // From a callback, while the batch's requests run: refused, nothing dropped.
  std::vector<bool> answers;
  GenerateOptions o;
  o.on_step = [&](const GenerateProgress&) {
    answers.push_back(llm_->reset_prefix_cache());
    return true;
  };
  const std::vector<GenerateResult> fifth = llm_->generate(p, {s}, o);
  EXPECT_EQ(fifth[0].output.num_cached_tokens, 48);
  expect_same_bits(first[0].output, fifth[0].output);
  ASSERT_GE(answers.size(), 2u);
  EXPECT_FALSE(answers.front());  // before the first step
  EXPECT_TRUE(answers.back());    // the call after the last step: nothing runs any more
}

TEST_F(LlmApiTest, ModelInfoAndVocabularyLookups) {
  const ModelInfo& m = llm_->model_info();
  EXPECT_TRUE(m.has_tokenizer);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_GT(m.max_model_len, 0);
  EXPECT_GT(m.num_tensors, 0);
  EXPECT_GT(m.weight_bytes, 0);
  ASSERT_FALSE(m.eos_token_ids.empty());
  const std::optional<int32_t> im_end = llm_->token_to_id("<|im_end|>");
  ASSERT_TRUE(im_end);
  EXPECT_EQ(llm_->id_to_token(*im_end), "<|im_end|>");
  EXPECT_FALSE(llm_->token_to_id("no such token, surely"));
  EXPECT_FALSE(llm_->id_to_token(-1));
  EXPECT_NE(llm_->tokenizer_config_json().find("<|im_end|>"), std::string::npos);
  // The generated qwen3 model ships Qwen3's generation_config.json (0.6 / 0.95 / 20).
  const GenerationDefaults& g = llm_->generation_defaults();
  EXPECT_EQ(g.temperature, 0.6f);
  EXPECT_EQ(g.top_k, 20);
}

}  // namespace
}  // namespace ditto

namespace ditto {
namespace {

// vLLM's LLM.beam_search on the engine: width 1 is the greedy path; a prompt's beams are the same
// bits alone or beside others, at temperature 0 and with sampled candidates; bad widths are named.
TEST_F(LlmApiTest, BeamSearchIsGreedyAtWidthOneAndTheSameBitsAloneOrTogether) {
  const std::vector<PromptInput> ps = prompts();
  BeamSearchParams bp;
  bp.beam_width = 1;
  bp.max_tokens = 6;
  bp.ignore_eos = true;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 6;
  greedy.ignore_eos = true;
  const std::vector<BeamSearchOutput> one = llm_->beam_search(ps, bp);
  const std::vector<GenerateResult> want = llm_->generate(ps, {greedy});
  for (size_t i = 0; i < ps.size(); ++i) {
    ASSERT_EQ(one[i].sequences.size(), 1u);
    const BeamSearchSequence& s = one[i].sequences[0];
    const std::vector<int32_t> out(s.tokens.begin() + s.num_prompt_tokens, s.tokens.end());
    EXPECT_EQ(out, want[i].output.outputs[0].token_ids) << i;
    EXPECT_EQ(s.text, llm_->detokenize(s.tokens, false));
  }
  for (float temperature : {0.0f, 0.9f}) {
    SCOPED_TRACE(temperature);
    bp.beam_width = 3;
    bp.max_tokens = 5;
    bp.ignore_eos = false;
    bp.temperature = temperature;
    const std::vector<BeamSearchOutput> together = llm_->beam_search(ps, bp, 5);
    for (size_t i = 0; i < ps.size(); ++i) {
      const std::vector<BeamSearchOutput> alone = llm_->beam_search({ps[i]}, bp, 5);
      ASSERT_EQ(alone[0].sequences.size(), 3u);
      ASSERT_EQ(together[i].sequences.size(), 3u);
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(alone[0].sequences[k].tokens, together[i].sequences[k].tokens) << i << " " << k;
        EXPECT_EQ(std::bit_cast<uint64_t>(alone[0].sequences[k].cum_logprob),
                  std::bit_cast<uint64_t>(together[i].sequences[k].cum_logprob));
      }
      for (size_t k = 1; k < 3; ++k) EXPECT_GE(together[i].sequences[k - 1].score, together[i].sequences[k].score);
    }
  }
  bp.beam_width = 11;  // 22 logprobs > max_logprobs 20
  try {
    llm_->beam_search(ps, bp);
    ADD_FAILURE() << "beam_width 11 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.param(), "beam_width");
  }
}

}  // namespace
}  // namespace ditto
