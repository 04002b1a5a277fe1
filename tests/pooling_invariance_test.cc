// Pooling (embeddings, reranker scores) under the contract, compared bit for bit: a prompt's
// embedding or score alone vs in a shuffled batch of 64, at a 16-token step budget (chunked
// prefill), with prefix-cache hits, on 1 and 2 threads, and beside generation requests in the same
// engine steps; with the arithmetic checked against its definition (unit norm, Matryoshka cut then
// normalized, mean of one token = last, sigmoid of the yes/no logit difference against the
// generation path's own logprobs) and bad input refused naming the field. The model is a generated
// two-layer qwen3-0.6b with the real Qwen3 tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/test_model_generator.h"
#include "core/error.h"
#include "core/test_temp_dir.h"
#include "ditto/llm.h"
#include "engine/llm_engine.h"

namespace ditto {
namespace {

// 64 prompts of 1 to 120 tokens; every fourth shares a 48-token prefix (prefix-cache hits).
// Under the sanitizers' CI pass (DITTO_SANITIZER set, every case several times slower) a batch of
// 16 finds the same memory errors; `make test` runs the batch of 64.
size_t batch_size() { return std::getenv("DITTO_SANITIZER") != nullptr ? 16 : 64; }

std::vector<PromptInput> prompts() {
  std::mt19937 rng(7);
  std::vector<int32_t> shared(48);
  for (int32_t& t : shared) t = static_cast<int32_t>(rng() % 150000);
  std::vector<PromptInput> p(batch_size());
  for (size_t i = 0; i < p.size(); ++i) {
    std::vector<int32_t> ids = i % 4 == 1 ? shared : std::vector<int32_t>{};
    const size_t n = 1 + (i * 53) % 120;
    for (size_t k = 0; k < n; ++k) ids.push_back(static_cast<int32_t>(rng() % 150000));
    p[i].token_ids = ids;
  }
  p[3] = PromptInput{.text = "The quick brown fox jumps over the lazy dog."};
  return p;
}

class PoolingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    TestModelOptions o;
    o.preset = "qwen3-0.6b";
    o.out_dir = dir_->file("model");
    o.num_hidden_layers = 2;
    o.seed = 5;
    o.tokenizer_root = std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules";
    write_test_model(o);
  }
  static void TearDownTestSuite() { delete dir_; }

  static EngineArgs args(const std::string& runner = "pooling", int threads = 2) {
    EngineArgs a;
    a.model = dir_->file("model");
    a.threads = threads;
    a.runner = runner;
    a.kv_cache_memory = int64_t{256} << 20;
    return a;
  }

  static testing::TempDir* dir_;
};
testing::TempDir* PoolingTest::dir_ = nullptr;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Each prompt alone on a fresh LLM (no neighbour, no cache), the baseline.
std::vector<std::vector<float>> alone(const EngineArgs& a, const std::vector<PromptInput>& prompts,
                                      const PoolingParams& params) {
  std::vector<std::vector<float>> out;
  for (const PromptInput& p : prompts) {
    LLM llm(a);
    const std::vector<PoolingResult> r = llm.encode({p}, {params});
    EXPECT_FALSE(r[0].error) << *r[0].error;
    out.push_back(r[0].output.data);
  }
  return out;
}

void expect_batches_match(const EngineArgs& base, const PoolingParams& params, size_t sample) {
  const std::vector<PromptInput> all = prompts();
  std::vector<PromptInput> few(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(sample));
  const std::vector<std::vector<float>> expected = alone(base, few, params);
  // Shuffled batch of 64, at a 16-token budget, run twice (the second pass hits the prefix cache),
  // on 1 and 2 threads.
  for (const int threads : {1, 2}) {
    for (const int64_t budget : {int64_t{16}, int64_t{1024}}) {
      EngineArgs a = base;
      a.threads = threads;
      a.max_num_batched_tokens = budget;
      a.long_prefill_token_threshold = budget;
      LLM llm(a);
      std::vector<size_t> order(all.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(threads * 100 + budget)));
      std::vector<PromptInput> batch;
      for (size_t i : order) batch.push_back(all[i]);
      const int passes = base.pooler_config.empty() ? 2 : 1;  // MEAN and CLS take no cache hits
      for (int pass = 0; pass < passes; ++pass) {
        SCOPED_TRACE("threads " + std::to_string(threads) + ", budget " + std::to_string(budget) + ", pass " +
                     std::to_string(pass));
        const std::vector<PoolingResult> r = llm.encode(batch, {params});
        for (size_t k = 0; k < order.size(); ++k) {
          if (order[k] >= sample) continue;
          ASSERT_FALSE(r[k].error) << *r[k].error;
          EXPECT_TRUE(same_bits(r[k].output.data, expected[order[k]])) << "prompt " << order[k];
        }
        if (pass == 1 && base.pooler_config.empty()) {  // LAST pooling (and scores) take cache hits
          EXPECT_GT(llm.last_stats().prefix_hit_tokens, 0);
        }
      }
    }
  }
}

TEST_F(PoolingTest, LastTokenEmbeddingIsTheSameBitsAloneBatchedChunkedCachedAndOnAnyThreads) {
  expect_batches_match(args(), PoolingParams{}, 6);
}

TEST_F(PoolingTest, MeanAndClsEmbeddingsAreTheSameBitsAloneBatchedAndChunked) {
  for (const char* type : {"MEAN", "CLS"}) {
    SCOPED_TRACE(type);
    EngineArgs a = args();
    a.pooler_config = std::string(R"({"pooling_type": ")") + type + "\"}";
    expect_batches_match(a, PoolingParams{}, 4);
  }
}

TEST_F(PoolingTest, RerankerScoreIsTheSameBitsAloneAndBatched) {
  EngineArgs a = args();
  a.task = "score";
  PoolingParams p;
  p.task = "score";
  expect_batches_match(a, p, 4);
}

TEST_F(PoolingTest, EmbeddingFollowsItsDefinition) {
  LLM llm(args());
  const PromptInput one_token{.token_ids = std::vector<int32_t>{1234}};
  const PromptInput text = prompts()[3];
  PoolingParams raw;
  raw.normalize = false;
  const std::vector<float> full = llm.embed({text}, raw)[0].output.data;
  ASSERT_EQ(static_cast<int64_t>(full.size()), llm.model_info().hidden_size);
  // Normalized: the raw vector over its float64 norm; Matryoshka: cut first, then normalized.
  for (const int64_t d : {int64_t{1024}, int64_t{64}, int64_t{1}}) {
    PoolingParams p;
    p.dimensions = d;
    const std::vector<float> e = llm.embed({text}, p)[0].output.data;
    ASSERT_EQ(static_cast<int64_t>(e.size()), d);
    double norm = 0.0;
    for (int64_t i = 0; i < d; ++i) norm += static_cast<double>(full[i]) * full[i];
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < d; ++i) ASSERT_EQ(e[i], static_cast<float>(full[i] / norm)) << "d " << d << " i " << i;
  }
  // MEAN and CLS of a one-token prompt are its LAST.
  const std::vector<float> last = llm.embed({one_token})[0].output.data;
  for (const char* type : {"MEAN", "CLS"}) {
    EngineArgs a = args();
    a.pooler_config = std::string(R"({"pooling_type": ")") + type + "\"}";
    LLM other(a);
    EXPECT_TRUE(same_bits(other.embed({one_token})[0].output.data, last)) << type;
  }
  // The cosine score of an embedding model is the embeddings' cosine; a text with itself scores 1.
  const std::vector<PoolingResult> s = llm.score({"Hello world"}, {"Hello world", "Goodbye"});
  ASSERT_FALSE(s[0].error);
  EXPECT_NEAR(s[0].output.data[0], 1.0f, 1e-6f);
  EXPECT_LT(s[1].output.data[0], 1.0f);
}

// The reranker's score is sigmoid(logit(yes) − logit(no)) at the pair's last token: checked
// against the generation path's raw logprobs of "yes" and "no" after the same rendered prompt
// (log-softmax shifts both logits alike, so their difference is the logits').
TEST_F(PoolingTest, RerankerScoreIsTheYesNoSigmoidOfTheNextTokenDistribution) {
  EngineArgs a = args();
  a.task = "score";
  LLM llm(a);
  const std::vector<PoolingResult> s = llm.score({"What is the capital of France?"}, {"Paris is the capital."});
  ASSERT_FALSE(s[0].error) << *s[0].error;
  const std::vector<int32_t>& ids = s[0].output.prompt_token_ids;
  const std::string rendered = llm.detokenize(ids, false);
  EXPECT_EQ(rendered,
            "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
            "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: "
            "Given a web search query, retrieve relevant passages that answer the query\n<Query>: What is the capital "
            "of France?\n<Document>: Paris is the capital.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  SamplingParams sp;
  sp.max_tokens = 1;
  sp.temperature = 0.0f;
  sp.logprob_token_ids = std::vector<int32_t>{*llm.token_to_id("yes"), *llm.token_to_id("no")};
  const std::vector<GenerateResult> g = llm.generate({PromptInput{.token_ids = ids}}, {sp});
  ASSERT_FALSE(g[0].error) << *g[0].error;
  const std::vector<TokenLogprob>& top = g[0].output.outputs[0].logprobs[0].top_logprobs;
  ASSERT_EQ(top.size(), 2u);
  const double expected = 1.0 / (1.0 + std::exp(static_cast<double>(top[1].logprob) - top[0].logprob));
  EXPECT_NEAR(s[0].output.data[0], expected, 1e-5);
  // The instruction is the template's to change; the raw difference without the activation.
  const std::vector<PoolingResult> other =
      llm.score({"q"}, {"d"}, {}, R"({"instruction": "Find code that answers the question"})");
  EXPECT_NE(llm.detokenize(other[0].output.prompt_token_ids, false).find("<Instruct>: Find code"), std::string::npos);
  PoolingParams raw;
  raw.use_activation = false;
  const float diff = llm.score({"What is the capital of France?"}, {"Paris is the capital."}, raw)[0].output.data[0];
  EXPECT_NEAR(1.0 / (1.0 + std::exp(-static_cast<double>(diff))), s[0].output.data[0], 1e-6);
}

// Pooling and generation requests share engine steps; each result is the bits it gets alone.
TEST_F(PoolingTest, PoolingBesideGenerationInOneEngineStepIsTheSameBits) {
  LLMEngine engine(args());
  const std::vector<PromptInput> all = prompts();
  SamplingParams sp;
  sp.max_tokens = 8;
  sp.temperature = 0.7f;
  sp.seed = 3;
  sp.logprobs = 2;
  auto run = [&](const std::vector<size_t>& which) {
    std::unique_ptr<Engine> e = engine.make_engine();
    for (size_t i : which) {
      EngineRequest r = i % 2 == 0 ? engine.input_processor().process_pooling(all[i], PoolingParams{})
                                   : engine.input_processor().process(all[i], sp, MaxTokensRule::kClipToContext);
      r.request_id = std::to_string(i);
      e->add(std::move(r));
    }
    std::map<std::string, RequestOutput> out;
    while (e->has_unfinished())
      for (RequestOutput& o : e->step()) out[o.request_id] = std::move(o);
    return out;
  };
  std::vector<size_t> together;
  for (size_t i = 0; i < 16; ++i) together.push_back(15 - i);
  const std::map<std::string, RequestOutput> mixed = run(together);
  for (size_t i : {size_t{0}, size_t{1}, size_t{4}, size_t{7}}) {
    const RequestOutput solo = run({i}).at(std::to_string(i));
    const RequestOutput& m = mixed.at(std::to_string(i));
    EXPECT_TRUE(same_bits(solo.pooled, m.pooled)) << i;
    if (i % 2 == 0) {
      EXPECT_FALSE(m.pooled.empty());
      continue;
    }
    ASSERT_EQ(solo.outputs.size(), 1u);
    EXPECT_EQ(solo.outputs[0].token_ids, m.outputs[0].token_ids) << i;
    for (size_t t = 0; t < solo.outputs[0].logprobs.size(); ++t)
      EXPECT_EQ(std::bit_cast<uint32_t>(solo.outputs[0].logprobs[t].token.logprob),
                std::bit_cast<uint32_t>(m.outputs[0].logprobs[t].token.logprob));
  }
}

TEST_F(PoolingTest, BadInputIsRefusedNamingTheField) {
  {
    LLM generator(args("generate"));
    try {
      generator.embed({prompts()[0]});
      ADD_FAILURE() << "a generation model embedded";
    } catch (const Error& e) {
      EXPECT_EQ(e.param(), "model");
      EXPECT_NE(std::string(e.what()).find("pooling"), std::string::npos) << e.what();
    }
  }
  EngineArgs small = args();
  small.max_model_len = 64;
  LLM llm(small);
  std::vector<int32_t> long_ids(100, 42);
  long_ids[99] = 7;
  const std::vector<PoolingResult> r = llm.embed({PromptInput{.token_ids = long_ids}});
  ASSERT_TRUE(r[0].error);
  EXPECT_NE(r[0].error->find("truncate_prompt_tokens"), std::string::npos) << *r[0].error;
  // Truncated to its last 64 tokens, it is those tokens' embedding.
  PoolingParams cut;
  cut.truncate_prompt_tokens = 64;
  const std::vector<PoolingResult> t = llm.embed({PromptInput{.token_ids = long_ids}}, cut);
  ASSERT_FALSE(t[0].error) << *t[0].error;
  const std::vector<int32_t> tail(long_ids.end() - 64, long_ids.end());
  EXPECT_TRUE(same_bits(t[0].output.data, llm.embed({PromptInput{.token_ids = tail}})[0].output.data));
  // Empty, out of the vocabulary, dimensions out of range, a score task on an embedding model.
  EXPECT_NE(llm.embed({PromptInput{.token_ids = std::vector<int32_t>{}}})[0].error->find("input"), std::string::npos);
  EXPECT_NE(llm.embed({PromptInput{.token_ids = std::vector<int32_t>{1 << 30}}})[0].error->find("vocabulary"),
            std::string::npos);
  PoolingParams wide;
  wide.dimensions = 4096;
  EXPECT_NE(llm.embed({prompts()[0]}, wide)[0].error->find("dimensions"), std::string::npos);
  PoolingParams score;
  score.task = "score";
  EXPECT_NE(llm.encode({prompts()[0]}, {score})[0].error->find("pooling task is embed"), std::string::npos);
  // The engine still answers.
  EXPECT_FALSE(llm.embed({prompts()[0]})[0].error);
}

}  // namespace
}  // namespace ditto
