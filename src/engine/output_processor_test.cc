// The way out: incremental text, stop strings (after min_tokens, cut or kept), logprob texts, the
// delta ledger (reports appended give the final output), the reasoning / tool-call split, and the model's generation
// defaults read at the front door.
#include "engine/output_processor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/generation_defaults.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

class OutputProcessorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = Tokenizer::load(DITTO_QWEN3_TOKENIZER_DIR).release(); }
  static void TearDownTestSuite() { delete tokenizer_; }
  static Tokenizer* tokenizer_;

  static EngineRequest request(SamplingParams p) {
    EngineRequest r;
    r.request_id = "r";
    r.prompt = "Hi";
    r.prompt_token_ids = tokenizer_->encode("Hi", false);
    p.seed = 5;
    r.params = p;
    return r;
  }
  static SampledToken sampled(int32_t id, float logprob) {
    SampledToken s;
    s.token.token_id = id;
    s.token.logprob = logprob;
    s.token.rank = 1;
    TokenLogprob other;
    other.token_id = id + 1;
    other.logprob = logprob - 1.0f;
    other.rank = 2;
    s.top_logprobs = {s.token, other};
    return s;
  }
  // Feeds `text`'s tokens to choice 0 until a stop string ends it; returns the tokens fed.
  static size_t feed(OutputProcessor& out, const std::string& text, bool* stopped = nullptr) {
    const std::vector<int32_t> ids = tokenizer_->encode(text, false);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (out.append_token(0, 0, static_cast<int64_t>(i), sampled(ids[i], -0.25f))) {
        if (stopped != nullptr) *stopped = true;
        out.finish(0, 0, FinishReason::kStop);
        return i + 1;
      }
    }
    out.finish(0, 0, FinishReason::kLength);
    return ids.size();
  }
};
Tokenizer* OutputProcessorTest::tokenizer_ = nullptr;

TEST_F(OutputProcessorTest, TextLogprobsAndTheirTexts) {
  OutputProcessor out(tokenizer_);
  SamplingParams p;
  p.logprobs = 1;
  out.add(0, request(p));
  feed(out, "Hello, wörld!");
  ASSERT_TRUE(out.finished(0));
  const std::vector<int64_t> keys = {0};
  std::vector<RequestOutput> r = out.report(keys);
  ASSERT_EQ(r.size(), 1u);
  const CompletionOutput& c = r[0].outputs[0];
  EXPECT_EQ(c.text, "Hello, wörld!");
  EXPECT_EQ(c.finish_reason, "length");
  EXPECT_EQ(r[0].seed, 5u);
  ASSERT_EQ(c.logprobs.size(), c.token_ids.size());
  std::string joined;
  for (const SampledToken& s : c.logprobs) {
    const int32_t id[1] = {s.token.token_id};
    EXPECT_EQ(s.token.decoded_token, tokenizer_->decode(id, false));
    EXPECT_EQ(s.token.bytes, tokenizer_->token_bytes(s.token.token_id));
    ASSERT_EQ(s.top_logprobs.size(), 2u);
    EXPECT_EQ(s.top_logprobs[1].bytes, tokenizer_->token_bytes(s.token.token_id + 1));
    joined += s.token.bytes;
  }
  EXPECT_EQ(joined, c.text);  // the bytes of the tokens make the text
  EXPECT_DOUBLE_EQ(c.cumulative_logprob, -0.25 * static_cast<double>(c.token_ids.size()));
  EXPECT_EQ(out.size(), 0u);  // forgotten after its last report
}

TEST_F(OutputProcessorTest, StopStringsCutOrKeptAndNotBeforeMinTokens) {
  for (bool keep : {false, true}) {
    OutputProcessor out(tokenizer_);
    SamplingParams p;
    p.stop = {"world", "lo, w"};
    p.include_stop_str_in_output = keep;
    out.add(0, request(p));
    bool stopped = false;
    feed(out, "Hello, world and more", &stopped);
    EXPECT_TRUE(stopped);
    const std::vector<int64_t> keys = {0};
    const CompletionOutput c = out.report(keys).at(0).outputs.at(0);
    // The earliest match wins, whichever stop string comes first in the list.
    EXPECT_EQ(c.text, keep ? "Hello, w" : "Hel");
    EXPECT_EQ(c.stop_string, "lo, w");
    EXPECT_EQ(c.finish_reason, "stop");
  }
  OutputProcessor out(tokenizer_);
  SamplingParams p;
  p.stop = {"Hello"};
  p.min_tokens = 1;  // "Hello" is the first token: too early to stop on
  out.add(0, request(p));
  bool stopped = false;
  feed(out, "Hello, Hello!", &stopped);
  EXPECT_TRUE(stopped);
  const std::vector<int64_t> keys = {0};
  EXPECT_EQ(out.report(keys).at(0).outputs.at(0).text, "Hello, ");
}

TEST_F(OutputProcessorTest, DeltaReportsAppendToTheFinalOutputAndHoldBackAPossibleStop) {
  const std::string text = "The end is near, the end is here.";
  for (bool with_stop : {false, true}) {
    SamplingParams p;
    p.logprobs = 0;
    if (with_stop) p.stop = {"is here"};
    OutputProcessor whole(tokenizer_), streamed(tokenizer_);
    whole.add(0, request(p));
    p.output_kind = RequestOutputKind::kDelta;
    streamed.add(0, request(p));
    feed(whole, text);
    const std::vector<int32_t> ids = tokenizer_->encode(text, false);
    const std::vector<int64_t> keys = {0};
    RequestOutput acc;
    size_t reports = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool stop = streamed.append_token(0, 0, static_cast<int64_t>(i), sampled(ids[i], -0.5f));
      if (stop || i + 1 == ids.size()) streamed.finish(0, 0, stop ? FinishReason::kStop : FinishReason::kLength);
      for (RequestOutput& d : streamed.report(keys)) {
        ++reports;
        if (!acc.outputs.empty() && with_stop && !d.finished) {  // never text a stop string may still cut
          EXPECT_EQ((acc.outputs[0].text + d.outputs[0].text).find("is h"), std::string::npos);
        }
        append_delta(acc, std::move(d));
      }
      if (stop) break;
    }
    const RequestOutput final_output = whole.report(keys).at(0);
    EXPECT_GT(reports, 3u);
    EXPECT_EQ(acc.outputs.at(0).text, final_output.outputs.at(0).text);
    EXPECT_EQ(acc.outputs[0].token_ids, final_output.outputs[0].token_ids);
    EXPECT_EQ(acc.outputs[0].finish_reason, final_output.outputs[0].finish_reason);
    EXPECT_EQ(acc.outputs[0].stop_string, final_output.outputs[0].stop_string);
    EXPECT_EQ(acc.prompt_token_ids, final_output.prompt_token_ids);
    EXPECT_TRUE(acc.finished);
  }
}

// With the output parsers on, each choice's text is split into reasoning, content and tool calls;
// streamed one token per report, the parts appended are the final output's, and the parts of each
// output are those of its whole text. Without parsers no output carries a message.
TEST_F(OutputProcessorTest, OutputParsersSplitTheMessageAlikeStreamedOrNot) {
  const std::string text =
      "<think>\nThe user wants Zürich.\n</think>\n\nOn it.<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Zürich\"}}\n</tool_call>";
  ChatOutputParsers parsers;
  parsers.reasoning = true;
  parsers.tool_call_parser = ToolCallParser::kHermes;
  auto run = [&](RequestOutputKind kind, ChatOutputParsers on) {
    OutputProcessor out(tokenizer_);
    SamplingParams p;
    p.output_kind = kind;
    p.n = 2;
    EngineRequest r = request(p);
    r.output_parsers = on;
    out.add(0, r);
    const std::vector<int32_t> ids = tokenizer_->encode(text, false);
    const std::vector<int64_t> keys = {0};
    RequestOutput acc;
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int64_t choice = 0; choice < 2; ++choice) {
        // choice 1 stops one token early: its tool call never closes and stays content
        if (choice == 1 && i + 1 == ids.size()) continue;
        EXPECT_FALSE(out.append_token(0, choice, static_cast<int64_t>(i), sampled(ids[i], -0.5f)));
        if (i + 1 == ids.size() - (choice == 1 ? 1 : 0)) out.finish(0, choice, FinishReason::kStop);
      }
      for (RequestOutput& d : out.report(keys)) append_delta(acc, std::move(d));
    }
    EXPECT_TRUE(acc.finished);
    return acc;
  };
  const RequestOutput whole = run(RequestOutputKind::kFinalOnly, parsers);
  const RequestOutput streamed = run(RequestOutputKind::kDelta, parsers);
  ASSERT_EQ(whole.outputs.size(), 2u);
  ASSERT_EQ(streamed.outputs.size(), 2u);
  for (size_t c = 0; c < 2; ++c) {
    ASSERT_TRUE(whole.outputs[c].message.has_value());
    ASSERT_TRUE(streamed.outputs[c].message.has_value());
    const ChatMessageParts& w = *whole.outputs[c].message;
    const ChatMessageParts& s = *streamed.outputs[c].message;
    const ChatMessageParts direct = parse_chat_output(whole.outputs[c].text, true, parsers);
    EXPECT_EQ(streamed.outputs[c].text, whole.outputs[c].text);
    for (const ChatMessageParts* m : {&w, &s}) {
      EXPECT_EQ(m->reasoning, direct.reasoning);
      EXPECT_EQ(m->content, direct.content);
      ASSERT_EQ(m->tool_calls.size(), direct.tool_calls.size());
      for (size_t k = 0; k < direct.tool_calls.size(); ++k) {
        EXPECT_EQ(m->tool_calls[k].name, direct.tool_calls[k].name);
        EXPECT_EQ(m->tool_calls[k].arguments, direct.tool_calls[k].arguments);
      }
    }
  }
  EXPECT_EQ(whole.outputs[0].message->reasoning, "\nThe user wants Zürich.\n");
  EXPECT_EQ(whole.outputs[0].message->content, "\n\nOn it.");
  ASSERT_EQ(whole.outputs[0].message->tool_calls.size(), 1u);
  EXPECT_EQ(whole.outputs[0].message->tool_calls[0].name, "get_weather");
  EXPECT_EQ(whole.outputs[0].message->tool_calls[0].arguments, "{\"city\":\"Zürich\"}");
  EXPECT_TRUE(whole.outputs[1].message->tool_calls.empty());
  EXPECT_NE(whole.outputs[1].message->content.find("<tool_call>"), std::string::npos);

  for (RequestOutputKind kind : {RequestOutputKind::kFinalOnly, RequestOutputKind::kDelta})
    for (const CompletionOutput& c : run(kind, {}).outputs) EXPECT_FALSE(c.message.has_value());
}

TEST_F(OutputProcessorTest, WithoutATokenizerIdsOnly) {
  OutputProcessor out(nullptr);
  SamplingParams p;
  p.logprobs = 1;
  out.add(3, request(p));
  EXPECT_FALSE(out.append_token(3, 0, 0, sampled(42, -1.0f)));
  out.finish(3, 0, FinishReason::kStop, 42);
  const std::vector<int64_t> keys = {3};
  const RequestOutput r = out.report(keys).at(0);
  EXPECT_EQ(r.outputs[0].text, "");
  EXPECT_EQ(r.outputs[0].token_ids, std::vector<int32_t>{42});
  EXPECT_EQ(r.outputs[0].stop_token_id, 42);
  EXPECT_EQ(r.outputs[0].logprobs.at(0).token.decoded_token, "");
}

// ---- generation_config.json at the front door -----------------------------------------------

class GenerationDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ditto_gen_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& json) { std::ofstream(dir_ / "generation_config.json") << json; }
  std::string error_of(const std::string& choice) {
    try {
      model_generation_defaults(dir_.string(), choice);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  }
  std::filesystem::path dir_;
};

TEST_F(GenerationDefaultsTest, ReadsVllmKeysAutoVllmAndAFolder) {
  write(R"({"temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_new_tokens": 64, "do_sample": true})");
  const GenerationDefaults d = model_generation_defaults(dir_.string(), "auto");
  SamplingParams p;
  d.apply(p);
  EXPECT_EQ(p.temperature, 0.6f);
  EXPECT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.max_tokens, 64);
  EXPECT_EQ(p.min_p, SamplingParams{}.min_p);  // absent keys stay SamplingParams'
  EXPECT_FALSE(model_generation_defaults(dir_.string(), "vllm").temperature.has_value());
  // A folder given by name, for a model without its own file.
  const GenerationDefaults other = model_generation_defaults("/nonexistent-model", dir_.string());
  EXPECT_EQ(other.top_k, 20);
  EXPECT_FALSE(model_generation_defaults((dir_ / "none").string(), "auto").top_k.has_value());

  InputProcessor door({.vocab_size = 1000, .max_model_len = 512, .num_kv_blocks = 64}, nullptr, nullptr, d);
  EXPECT_EQ(door.default_sampling_params().top_k, 20);
  // A chat that gives no max_tokens gets the rest of the context, at most max_new_tokens.
  SamplingParams q = door.default_sampling_params();
  const EngineRequest r =
      door.process(PromptInput{.token_ids = std::vector<int32_t>{1, 2, 3}}, q, MaxTokensRule::kRestOfContext);
  EXPECT_EQ(r.params.max_tokens, 64);
  ASSERT_TRUE(r.params.seed.has_value());
  EXPECT_LT(*r.params.seed, uint64_t{1} << 53);
}

TEST_F(GenerationDefaultsTest, BadValuesNameTheFileAndKey) {
  write(R"({"top_p": 1.5})");
  EXPECT_NE(error_of("auto").find("generation_config.json"), std::string::npos) << error_of("auto");
  EXPECT_NE(error_of("auto").find("top_p"), std::string::npos) << error_of("auto");
  write(R"({"top_k": "many"})");
  EXPECT_NE(error_of("auto").find("top_k"), std::string::npos) << error_of("auto");
  write("[1, 2]");
  EXPECT_NE(error_of("auto").find("object"), std::string::npos) << error_of("auto");
  EXPECT_NE(error_of("/no/such/folder").find("generation_config"), std::string::npos);
}

}  // namespace
TEST(ChatAddSpecialTokensTest, AddsTheTokenizersBosOnTopOfTheRenderedChat) {
  // vLLM's chat add_special_tokens: the tokenizer's special tokens (Llama 3.1's BOS, 128000) on top
  // of what the template wrote; off by default.
  std::unique_ptr<Tokenizer> t;
  try {
    t = Tokenizer::load(DITTO_LLAMA3_TOKENIZER_DIR);
  } catch (const Error&) {
    GTEST_SKIP() << "Llama 3.1 tokenizer not installed (scripts/install-deps.sh)";
  }
  const ChatTemplate chat = ChatTemplate::from_config(
      nlohmann::ordered_json{{"chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}"}}, "test");
  const InputProcessor door({.vocab_size = 128256, .max_model_len = 512, .num_kv_blocks = 64}, t.get(), &chat);
  PromptInput in{.messages = R"([{"role": "user", "content": "Hello"}])"};
  const std::vector<int32_t> plain = door.process(in, SamplingParams{}, MaxTokensRule::kAsGiven).prompt_token_ids;
  EXPECT_EQ(plain, t->encode("Hello", false));
  in.chat_add_special_tokens = true;
  std::vector<int32_t> with_bos = {128000};
  with_bos.insert(with_bos.end(), plain.begin(), plain.end());
  EXPECT_EQ(door.process(in, SamplingParams{}, MaxTokensRule::kAsGiven).prompt_token_ids, with_bos);
}

}  // namespace ditto
