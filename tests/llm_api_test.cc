// The public C++ API (include/ditto/) as a program uses it: the streaming call gives the same bits
// as generate() (reports appended, compared with memcmp), the tokenizer calls go through the same
// front door, and malformed chat JSON is refused naming its field. The model is a generated
// one-layer qwen3-0.6b with the real Qwen3 tokenizer; only its set-up uses internal headers.
#include <gtest/gtest.h>

#include <bit>
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

}  // namespace
}  // namespace ditto
