// Request parsing (types, ranges, the field named in each error) and response formatting (the
// OpenAI shapes; streamed chunks concatenate to the non-streamed body's text and logprobs).
#include "server/openai_api.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/output_processor.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

ApiRequest parse(ApiEndpoint e, const std::string& body) { return parse_api_request(e, Json::parse(body)); }

// The ApiError (the HTTP mapping of the Error) of parsing `body`, or a failure.
ApiError parse_error(ApiEndpoint e, const std::string& body) {
  try {
    parse(e, body);
  } catch (const Error& err) {
    return to_api_error(err);
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

constexpr auto kCompletions = ApiEndpoint::kCompletions;
constexpr auto kChat = ApiEndpoint::kChatCompletions;

TEST(OpenAiApiTest, CompletionPromptKinds) {
  EXPECT_EQ(*parse(kCompletions, R"({"prompt": "hi"})").prompts.at(0).text, "hi");
  const ApiRequest ids = parse(kCompletions, R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(*ids.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  const ApiRequest many = parse(kCompletions, R"({"prompt": ["a", [4, 5], "b"]})");
  ASSERT_EQ(many.prompts.size(), 3u);
  EXPECT_EQ(*many.prompts[1].token_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(*many.prompts[2].text, "b");
}

TEST(OpenAiApiTest, SamplingFieldsMapToSamplingParams) {
  const ApiRequest r = parse(kCompletions, R"({"prompt": "x", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "top_k": 4, "min_p": 0.1, "n": 3, "seed": -5, "stop": "END", "presence_penalty": 0.5,
      "frequency_penalty": -0.5, "repetition_penalty": 1.1, "ignore_eos": true, "min_tokens": 2,
      "stop_token_ids": [9], "logprobs": 2, "echo": true, "user": "u", "stream": true,
      "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.params.temperature, 0.5f);
  EXPECT_EQ(r.params.top_k, 4);
  EXPECT_EQ(r.params.n, 3);
  EXPECT_EQ(*r.params.seed, 18446744073709551611ull);  // -5 is 2^64 - 5, as vLLM (torch) reads it
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.params.stop_token_ids, std::vector<int32_t>{9});
  EXPECT_EQ(*r.params.logprobs, 2);
  EXPECT_EQ(*r.params.prompt_logprobs, 2);  // echo with logprobs scores the prompt too
  EXPECT_TRUE(r.echo && r.stream && r.include_usage && r.params.ignore_eos);
  EXPECT_TRUE(r.ignored_fields.empty());
}

TEST(OpenAiApiTest, ChatFields) {
  const ApiRequest r = parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 9,
      "max_tokens": 3, "logprobs": true, "top_logprobs": 4, "tools": [{"type": "function", "function": {"name": "f"}}],
      "chat_template_kwargs": {"enable_thinking": false}, "frequency_penalty": 0.1, "metadata": {"a": 1}})");
  EXPECT_EQ(r.params.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_EQ(*r.params.logprobs, 4);
  EXPECT_EQ(Json::parse(r.prompts.at(0).tools).size(), 1u);
  EXPECT_EQ(Json::parse(r.prompts[0].chat_template_kwargs)["enable_thinking"], false);
  EXPECT_EQ(r.ignored_fields, std::vector<std::string>{"metadata"});
  EXPECT_FALSE(parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": false})").params.logprobs);
  // tool_choice "none" keeps the tools in the prompt, as vLLM's default (issue 30); the server turns
  // the parsing of tool calls off.
  const ApiRequest none = parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type":
      "function", "function": {"name": "f"}}], "tool_choice": "none"})");
  EXPECT_EQ(Json::parse(none.prompts[0].tools).size(), 1u);
  EXPECT_TRUE(none.tool_choice_none);
}

TEST(OpenAiApiTest, ErrorsNameTheParameter) {
  struct Case {
    ApiEndpoint endpoint;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {kCompletions, R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {kCompletions, R"({"prompt": "x", "n": 1000})", "n"},
      {kCompletions, R"({"prompt": "x", "n": 0})", "n"},
      {kCompletions, R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {kCompletions, R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {kCompletions, R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {kCompletions, R"({"prompt": "x", "seed": 9223372036854775808})", "seed"},
      {kCompletions, R"({"prompt": "x", "stop": [1]})", "stop"},
      {kCompletions, R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {kCompletions, R"({"prompt": "x", "logit_bias": {"five": 1}})", "logit_bias"},
      {kCompletions, R"({"prompt": "x", "logit_bias": [5]})", "logit_bias"},
      {kCompletions, R"({"prompt": "x", "logit_bias": {"5": "up"}})", "logit_bias"},
      {kCompletions, R"({"prompt": "x", "allowed_token_ids": [1, "2"]})", "allowed_token_ids"},
      {kCompletions, R"({"prompt": "x", "bad_words": "x"})", "bad_words"},
      {kCompletions, R"({"prompt": "x", "truncate_prompt_tokens": 1.5})", "truncate_prompt_tokens"},
      {kCompletions, R"({"prompt": "x", "return_token_ids": 1})", "return_token_ids"},
      {kCompletions, R"({"prompt": "x", "best_of": 3})", "best_of"},
      {kCompletions, R"({"prompt": "x", "suffix": "y"})", "suffix"},
      {kCompletions, R"({"prompt": [1, -2]})", "prompt"},
      {kCompletions, R"({"prompt": []})", "prompt"},
      {kCompletions, R"({"prompt": [true]})", "prompt"},
      {kCompletions, R"({"max_tokens": 3})", "prompt"},
      {kCompletions, R"({"prompt": "x", "model": 5})", "model"},
      {kChat, R"({"messages": []})", "messages"},
      {kChat, R"({"messages": [{"content": "hi"}]})", "messages"},
      {kChat, R"({"messages": [{"role": 7, "content": "hi"}]})", "messages"},
      {kChat, R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})", "top_logprobs"},
      {kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": 3})", "logprobs"},
      {kChat, R"({"messages": [{"role": "user", "content": "hi"}], "tools": {}})", "tools"},
      {kChat, R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"})", "tool_choice"},
      {kChat, R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "auto"})", "tool_choice"},
      {kChat, R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "xml"}})",
       "response_format.type"},
      {kChat, R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "any"})", "tool_choice"},
      {kChat, R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -1})",
       "max_completion_tokens"},
  };
  for (const Case& c : cases) {
    const ApiError e = parse_error(c.endpoint, c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.body()["error"]["param"], c.param) << c.body << " -> " << e.what();
    EXPECT_EQ(e.body()["error"]["type"], "BadRequestError");
    EXPECT_EQ(e.body()["error"]["code"], 400);
  }
  EXPECT_EQ(parse_error(kCompletions, "[1]").status(), 400);
}

// Issue 30: a vLLM field that would change the result is honoured or refused naming it, never
// dropped; at its no-op value it passes, and only fields nobody reads are "ignored" (logged).
TEST(OpenAiApiTest, ResultChangingFieldsAreHonouredOrRefusedByName) {
  const std::string chat = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"("thinking_token_budget": 10)", "thinking_token_budget"},
      {R"("prompt_embeds": "AAAA")", "prompt_embeds"},
      {R"("spaces_between_special_tokens": false)", "spaces_between_special_tokens"},
      {R"("logits_processors": ["x"])", "logits_processors"},
  };
  for (const auto& [field, param] : refused) {
    for (ApiEndpoint e : {kCompletions, kChat}) {
      const std::string body = "{" + (e == kChat ? chat : std::string(R"("prompt": "x")")) + ", " + field + "}";
      const ApiError err = parse_error(e, body);
      EXPECT_EQ(err.status(), 400) << body;
      EXPECT_EQ(err.body()["error"]["param"], param) << body << " -> " << err.what();
      EXPECT_NE(std::string(err.what()).find("not supported by ditto"), std::string::npos) << err.what();
    }
  }
  const std::vector<std::pair<std::string, std::string>> chat_refused = {
      {R"("add_special_tokens": "yes")", "add_special_tokens"},
      {R"("include_reasoning": 0)", "include_reasoning"},
      {R"("documents": {"text": "d"})", "documents"},
      {R"("chat_template": 7)", "chat_template"},
      {R"("parallel_tool_calls": "no")", "parallel_tool_calls"},
      {R"("stream_options": {"continuous_usage_stats": true})", "stream_options"},  // only with stream
      {R"("stream": true, "prompt_logprobs": 1)", "prompt_logprobs"},
      {R"("reasoning_effort": "extreme")", "reasoning_effort"},
  };
  for (const auto& [field, param] : chat_refused) {
    const std::string body = "{" + chat + ", " + field + "}";
    EXPECT_EQ(parse_error(kChat, body).body()["error"]["param"], param) << body;
  }
  // At their no-op values they pass, and none is listed as ignored.
  const ApiRequest inert = parse(kChat, "{" + chat + R"(, "use_beam_search": false, "length_penalty": 1,
      "bad_words": [], "allowed_token_ids": null, "return_token_ids": false, "spaces_between_special_tokens": true,
      "echo": false, "add_special_tokens": false, "parallel_tool_calls": true, "include_reasoning": true,
      "metadata": {"k": "v"}})");
  EXPECT_EQ(inert.ignored_fields, std::vector<std::string>{"metadata"});
  // Honoured: completions' add_special_tokens reaches every prompt; chat's reasoning_effort goes to
  // the template (a chat_template_kwargs entry wins); chat prompt_logprobs are kept.
  const ApiRequest add = parse(kCompletions, R"({"prompt": ["a", "b"], "add_special_tokens": false})");
  EXPECT_FALSE(add.prompts.at(0).add_special_tokens);
  EXPECT_FALSE(add.prompts.at(1).add_special_tokens);
  EXPECT_TRUE(parse(kCompletions, R"({"prompt": "a"})").prompts.at(0).add_special_tokens);
  const ApiRequest effort = parse(kChat, "{" + chat + R"(, "reasoning_effort": "low"})");
  EXPECT_EQ(Json::parse(effort.prompts.at(0).chat_template_kwargs)["reasoning_effort"], "low");
  const ApiRequest both = parse(
      kChat, "{" + chat + R"(, "reasoning_effort": "low", "chat_template_kwargs": {"reasoning_effort": "high"}})");
  EXPECT_EQ(Json::parse(both.prompts.at(0).chat_template_kwargs)["reasoning_effort"], "high");
  EXPECT_EQ(parse(kChat, "{" + chat + R"(, "prompt_logprobs": 2})").params.prompt_logprobs, 2);
  // The per-row fields reach SamplingParams (logit_bias clamped to [-100, 100] as vLLM does).
  const ApiRequest rows = parse(kCompletions, R"({"prompt": "a", "logit_bias": {"5": 1.5, "9": -300},
      "allowed_token_ids": [3, 5], "bad_words": ["no"], "truncate_prompt_tokens": 7, "return_token_ids": true})");
  EXPECT_EQ(rows.params.logit_bias, (std::map<int32_t, float>{{5, 1.5f}, {9, -100.0f}}));
  EXPECT_EQ(rows.params.allowed_token_ids, (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(rows.params.bad_words, std::vector<std::string>{"no"});
  EXPECT_EQ(rows.params.truncate_prompt_tokens, 7);
  EXPECT_TRUE(rows.return_token_ids);
  EXPECT_TRUE(rows.ignored_fields.empty());
  // use_beam_search (n beams, length_penalty) is the server's; sampling fields it cannot honour
  // are refused by name.
  const ApiRequest beams = parse(kCompletions, R"({"prompt": "a", "use_beam_search": true, "n": 3,
      "length_penalty": 0.5, "temperature": 0})");
  EXPECT_TRUE(beams.use_beam_search);
  EXPECT_EQ(beams.length_penalty, 0.5f);
  EXPECT_EQ(
      parse_error(kCompletions, R"({"prompt": "a", "use_beam_search": true, "top_p": 0.5})").body()["error"]["param"],
      "top_p");
  EXPECT_EQ(parse_error(kChat, "{" + chat + R"(, "use_beam_search": true, "stop": ["x"]})").body()["error"]["param"],
            "stop");
}

class FormatterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = Tokenizer::load(DITTO_QWEN3_TOKENIZER_DIR).release();
    door_ = new InputProcessor({.vocab_size = 151936, .max_model_len = 4096, .num_kv_blocks = 256}, tokenizer_,
                               /*chat_template=*/nullptr);
  }
  static void TearDownTestSuite() {
    delete door_;
    delete tokenizer_;
  }
  static Tokenizer* tokenizer_;
  static InputProcessor* door_;

  // A logprob entry with its text, as the engine's OutputProcessor gives it.
  static TokenLogprob entry(int32_t id, float logprob, int64_t rank) {
    const int32_t ids[1] = {id};
    return {id, logprob, rank, tokenizer_->decode(ids, false), tokenizer_->token_bytes(id)};
  }

  // A finished output of n choices, text from the tokenizer, for the prompt "Hello".
  static RequestOutput result(const std::vector<std::vector<int32_t>>& choices, bool logprobs) {
    RequestOutput r;
    r.prompt = "Hello";
    r.prompt_token_ids = tokenizer_->encode("Hello");
    r.prompt_logprobs.resize(r.prompt_token_ids.size());
    for (size_t c = 0; c < choices.size(); ++c) {
      CompletionOutput o;
      o.index = static_cast<int64_t>(c);
      o.token_ids = choices[c];
      o.text = tokenizer_->decode(choices[c]);
      for (int32_t id : choices[c])
        if (logprobs) o.logprobs.push_back({entry(id, -0.5f, 1), {entry(id, -0.5f, 1), entry(id + 1, -1.5f, 2)}});
      o.finish_reason = "length";
      r.outputs.push_back(o);
    }
    r.finished = true;
    return r;
  }

  // The kDelta reports that make up `full`: one token per choice each (its raw bytes as text), the
  // prompt fields in the first, a choice's finish in the report of its last token.
  static std::vector<RequestOutput> deltas(const RequestOutput& full) {
    size_t steps = 0;
    for (const CompletionOutput& c : full.outputs) steps = std::max(steps, c.token_ids.size());
    std::vector<RequestOutput> out;
    for (size_t t = 0; t < steps; ++t) {
      RequestOutput d;
      if (t == 0) {
        d.prompt = full.prompt;
        d.prompt_token_ids = full.prompt_token_ids;
        d.prompt_logprobs = full.prompt_logprobs;
      }
      for (const CompletionOutput& c : full.outputs) {
        CompletionOutput o;
        o.index = c.index;
        if (t < c.token_ids.size()) {
          o.token_ids = {c.token_ids[t]};
          o.text = tokenizer_->token_bytes(c.token_ids[t]);
          if (t < c.logprobs.size()) o.logprobs = {c.logprobs[t]};
        }
        if (t + 1 == c.token_ids.size()) o.finish_reason = c.finish_reason;
        d.outputs.push_back(std::move(o));
      }
      d.finished = t + 1 == steps;
      out.push_back(std::move(d));
    }
    std::vector<std::string> texts(full.outputs.size());
    for (const RequestOutput& d : out)
      for (const CompletionOutput& c : d.outputs) texts[static_cast<size_t>(c.index)] += c.text;
    for (const CompletionOutput& c : full.outputs) EXPECT_EQ(texts[static_cast<size_t>(c.index)], c.text);
    return out;
  }

  // `ids` as the engine's OutputProcessor reports them with `parsers` on, for the prompt "Hello",
  // ending with a stop: the final output (kFinalOnly), or one report per token (kDelta).
  static std::vector<RequestOutput> through_output_processor(const std::vector<int32_t>& ids, ChatOutputParsers parsers,
                                                             RequestOutputKind kind) {
    EngineRequest r;
    r.request_id = "chatcmpl-7";
    r.prompt = "Hello";
    r.prompt_token_ids = tokenizer_->encode("Hello");
    r.params.seed = 1;
    r.params.output_kind = kind;
    r.output_parsers = parsers;
    OutputProcessor out(tokenizer_);
    out.add(0, r);
    const int64_t keys[1] = {0};
    std::vector<RequestOutput> reports;
    for (size_t t = 0; t < ids.size(); ++t) {
      SampledToken s;
      s.token.token_id = ids[t];
      EXPECT_FALSE(out.append_token(0, 0, static_cast<int64_t>(t), std::move(s)));
      if (t + 1 == ids.size()) out.finish(0, 0, FinishReason::kStop);
      for (RequestOutput& report : out.report(keys)) reports.push_back(std::move(report));
    }
    return reports;
  }
};
Tokenizer* FormatterTest::tokenizer_ = nullptr;
InputProcessor* FormatterTest::door_ = nullptr;

TEST_F(FormatterTest, CompletionStreamConcatenatesToTheResponse) {
  ApiRequest req = parse(kCompletions, R"({"prompt": "Hello", "n": 2, "logprobs": 1, "echo": true, "stream": true,
      "stream_options": {"include_usage": true}})");
  const RequestOutput full = result({tokenizer_->encode(" big world", false), tokenizer_->encode(" é!", false)}, true);
  ApiFormatter whole(req, *door_, "cmpl-1", 5, "m", {"Hello"});
  const Json body = whole.response({full});
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "Hello big world");
  EXPECT_EQ(body["usage"]["completion_tokens"], full.outputs[0].token_ids.size() + full.outputs[1].token_ids.size());
  EXPECT_TRUE(body["choices"][0]["logprobs"]["token_logprobs"][0].is_null());  // the first prompt token

  // Stream the same result one token at a time.
  ApiFormatter streamer(req, *door_, "cmpl-1", 5, "m", {"Hello"});
  std::vector<std::string> texts(2);
  std::vector<Json> token_logprobs(2, Json::array()), text_offsets(2, Json::array());
  std::vector<std::string> finish(2);
  for (const RequestOutput& delta : deltas(full)) {
    for (const Json& chunk : streamer.stream_chunks(0, delta)) {
      EXPECT_EQ(chunk["id"], "cmpl-1");
      EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
      for (const Json& choice : chunk["choices"]) {
        const size_t c = choice["index"].get<size_t>();
        texts[c] += choice["text"].get<std::string>();
        for (const Json& lp : choice["logprobs"]["token_logprobs"]) token_logprobs[c].push_back(lp);
        for (const Json& o : choice["logprobs"]["text_offset"]) text_offsets[c].push_back(o);
        if (!choice["finish_reason"].is_null()) finish[c] = choice["finish_reason"];
      }
    }
  }
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(texts[c], body["choices"][c]["text"]) << c;
    EXPECT_EQ(token_logprobs[c], body["choices"][c]["logprobs"]["token_logprobs"]) << c;
    EXPECT_EQ(text_offsets[c], body["choices"][c]["logprobs"]["text_offset"]) << c;
    EXPECT_EQ(finish[c], "length");
  }
  const Json usage = streamer.usage_chunk();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], body["usage"]);
}

TEST_F(FormatterTest, ChatShapes) {
  ApiRequest req = parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true,
      "top_logprobs": 1, "stream": true})");
  const RequestOutput full = result({tokenizer_->encode("Sure, é", false)}, true);
  ApiFormatter f(req, *door_, "chatcmpl-1", 5, "m", {"Hello"});
  const Json body = f.response({full});
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Sure, é");
  const Json& lp = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), full.outputs[0].token_ids.size());
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);  // the fake entries hold 2
  std::string bytes;
  for (const Json& e : lp)
    for (const Json& b : e["bytes"]) bytes.push_back(static_cast<char>(b.get<int>()));
  EXPECT_EQ(bytes, "Sure, é");  // raw token bytes reassemble the text, split characters included

  // The whole output in one report (as a step that produced it all would send).
  ApiFormatter s(req, *door_, "chatcmpl-1", 5, "m", {"Hello"});
  const std::vector<Json> chunks = s.stream_chunks(0, full);
  ASSERT_EQ(chunks.size(), 2u);  // vLLM's: the role alone, then the content with the finish reason
  EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], (Json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(chunks[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(chunks[1]["choices"][0]["delta"], (Json{{"content", "Sure, é"}}));
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(s.stream_chunks(0, full).empty());  // nothing new
}

// vLLM's return_token_ids: completions put the prompt's ids in each choice, chat beside the
// choices; the streamed chunks' token_ids concatenate to the response's.
TEST_F(FormatterTest, ReturnTokenIdsStreamedAndNot) {
  const RequestOutput full = result({tokenizer_->encode(" big world", false), tokenizer_->encode(" é!", false)}, false);
  for (ApiEndpoint endpoint : {kCompletions, kChat}) {
    const bool chat = endpoint == kChat;
    SCOPED_TRACE(chat ? "chat" : "completions");
    const std::string input = chat ? R"("messages": [{"role": "user", "content": "hi"}])" : R"("prompt": "Hello")";
    ApiRequest req = parse(endpoint, "{" + input + R"(, "n": 2, "return_token_ids": true, "stream": true})");
    ApiFormatter whole(req, *door_, "x-1", 5, "m", {"Hello"});
    const Json body = whole.response({full});
    for (size_t c = 0; c < 2; ++c) {
      EXPECT_EQ(body["choices"][c]["token_ids"], full.outputs[c].token_ids);
      if (!chat) {
        EXPECT_EQ(body["choices"][c]["prompt_token_ids"], full.prompt_token_ids);
      }
    }
    if (chat) {
      EXPECT_EQ(body["prompt_token_ids"], full.prompt_token_ids);
    }
    ApiFormatter streamer(req, *door_, "x-1", 5, "m", {"Hello"});
    std::vector<std::vector<int32_t>> ids(2);
    int prompt_ids_seen = 0;
    for (const RequestOutput& delta : deltas(full)) {
      for (const Json& chunk : streamer.stream_chunks(0, delta)) {
        if (chunk.contains("prompt_token_ids")) {
          EXPECT_EQ(chunk["prompt_token_ids"], full.prompt_token_ids);
          ++prompt_ids_seen;
        }
        for (const Json& choice : chunk["choices"]) {
          ASSERT_TRUE(choice.contains("token_ids") && choice["token_ids"].is_array()) << choice.dump();
          for (const Json& id : choice["token_ids"]) ids[choice["index"].get<size_t>()].push_back(id.get<int32_t>());
          if (choice.contains("prompt_token_ids") && !choice["prompt_token_ids"].is_null()) {
            EXPECT_EQ(choice["prompt_token_ids"], full.prompt_token_ids);
            ++prompt_ids_seen;
          }
        }
      }
    }
    for (size_t c = 0; c < 2; ++c) EXPECT_EQ(ids[c], full.outputs[c].token_ids) << c;
    EXPECT_EQ(prompt_ids_seen, chat ? 1 : 2);  // chat: once; completions: each choice's first chunk
  }
  // Off by default: null, as vLLM's.
  ApiRequest plain = parse(kCompletions, R"({"prompt": "Hello"})");
  const Json body = ApiFormatter(plain, *door_, "x-1", 5, "m", {"Hello"}).response({full});
  EXPECT_TRUE(body["choices"][0]["token_ids"].is_null());
  EXPECT_TRUE(body["choices"][0]["prompt_token_ids"].is_null());
}

// usage.completion_tokens_details.reasoning_tokens: the tokens before `</think>` (the markers not
// counted), the same whole and streamed; none with thinking disabled; absent without a parser.
TEST_F(FormatterTest, ReasoningTokensAreCountedInTheUsage) {
  ApiRequest req = parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}], "stream": true,
      "stream_options": {"include_usage": true}})");
  req.parsers.reasoning = true;
  const std::vector<int32_t> thought = tokenizer_->encode(" Well Paris", false);
  std::vector<int32_t> ids = {*tokenizer_->token_to_id("<think>")};
  ids.insert(ids.end(), thought.begin(), thought.end());
  ids.push_back(*tokenizer_->token_to_id("</think>"));
  for (int32_t id : tokenizer_->encode(" It is.", false)) ids.push_back(id);
  RequestOutput full = result({ids}, false);
  const Json body = ApiFormatter(req, *door_, "chatcmpl-1", 5, "m", {"Hello"}).response({full});
  EXPECT_EQ(body["usage"]["completion_tokens_details"]["reasoning_tokens"], thought.size());
  ApiFormatter streamer(req, *door_, "chatcmpl-1", 5, "m", {"Hello"});
  for (const RequestOutput& delta : deltas(full)) streamer.stream_chunks(0, delta);
  EXPECT_EQ(streamer.usage_chunk()["usage"], body["usage"]);
  req.parsers.thinking_disabled = true;
  EXPECT_EQ(ApiFormatter(req, *door_, "chatcmpl-1", 5, "m", {"Hello"})
                .response({full})["usage"]["completion_tokens_details"]["reasoning_tokens"],
            0);
  req.parsers = ChatOutputParsers{};
  EXPECT_FALSE(ApiFormatter(req, *door_, "chatcmpl-1", 5, "m", {"Hello"})
                   .response({full})["usage"]
                   .contains("completion_tokens_details"));
}

// vLLM's chat response carries prompt_logprobs beside the choices (they used to be computed and dropped).
TEST_F(FormatterTest, ChatPromptLogprobsAreReturned) {
  ApiRequest req = parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 1})");
  RequestOutput full = result({tokenizer_->encode("Sure", false)}, false);
  ASSERT_GE(full.prompt_token_ids.size(), 1u);
  const int32_t id = full.prompt_token_ids.back();
  full.prompt_logprobs.back() = SampledToken{entry(id, -2.25f, 3), {entry(id + 1, -0.75f, 1)}};
  ApiFormatter f(req, *door_, "chatcmpl-1", 5, "m", {"Hello"});
  const Json body = f.response({full});
  ASSERT_TRUE(body.contains("prompt_logprobs")) << body.dump();
  const Json& pl = body["prompt_logprobs"];
  ASSERT_EQ(pl.size(), full.prompt_token_ids.size());
  const Json& last = pl.back()[std::to_string(id)];
  EXPECT_EQ(last["logprob"].get<float>(), -2.25f);
  EXPECT_EQ(last["rank"], 3);
  EXPECT_EQ(pl.back()[std::to_string(id + 1)]["rank"], 1);
  EXPECT_FALSE(body["choices"][0].contains("prompt_logprobs"));  // completions put them per choice
  // Without the field, null (vLLM's).
  ApiRequest plain = parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_TRUE(
      ApiFormatter(plain, *door_, "chatcmpl-2", 5, "m", {"Hello"}).response({full})["prompt_logprobs"].is_null());
}

// With the reasoning and tool-call parsers on, streaming token by token sends the same
// reasoning_content, content and tool_calls as the non-streamed message.
TEST_F(FormatterTest, ChatParsersStreamTheSameMessage) {
  ApiRequest req = parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}], "stream": true})");
  req.parsers.reasoning = true;
  req.parsers.tool_call_parser = ToolCallParser::kHermes;
  const std::string text =
      "<think>\nLet me see.\n</think>\n\nChecking.<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Zürich\"}}\n</tool_call>";
  const std::vector<int32_t> ids = tokenizer_->encode(text, false);
  const RequestOutput full = through_output_processor(ids, req.parsers, RequestOutputKind::kFinalOnly).at(0);
  ApiFormatter whole(req, *door_, "chatcmpl-7", 5, "m", {"Hello"});
  const Json message = whole.response({full})["choices"][0]["message"];
  EXPECT_EQ(whole.response({full})["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(message["reasoning_content"], "\nLet me see.\n");
  EXPECT_EQ(message["reasoning"], message["reasoning_content"]);  // vLLM's current name beside the old one
  EXPECT_EQ(message["content"], "\n\nChecking.");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Zürich\"}");

  ApiFormatter streamer(req, *door_, "chatcmpl-7", 5, "m", {"Hello"});
  std::string reasoning, content, finish;
  Json calls = Json::array();
  for (const RequestOutput& delta : through_output_processor(ids, req.parsers, RequestOutputKind::kDelta)) {
    for (const Json& chunk : streamer.stream_chunks(0, delta)) {
      const Json& choice = chunk["choices"][0];
      const Json& d = choice["delta"];
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("reasoning_content")) {
        EXPECT_EQ(d["reasoning"], d["reasoning_content"]);
      }
      if (d.contains("content")) content += d["content"].get<std::string>();
      if (d.contains("tool_calls"))
        for (Json c : d["tool_calls"]) {
          EXPECT_EQ(c["index"], calls.size());
          c.erase("index");
          calls.push_back(c);
        }
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  EXPECT_EQ(reasoning, message["reasoning_content"]);
  EXPECT_EQ(content, message["content"]);
  EXPECT_EQ(calls, message["tool_calls"]);
  EXPECT_EQ(finish, "tool_calls");
}

// vLLM's chat echo, reply role, parallel_tool_calls, per-request chat_template and
// continuous_usage_stats, as parsed (issue 30).
TEST(OpenAiApiTest, ChatEchoRoleToolCallsTemplateAndContinuousUsageAsVllm) {
  const std::string continued = R"("messages": [{"role": "user", "content": "Go on"},
      {"role": "assistant", "content": [{"type": "text", "text": "Once"}, {"type": "text", "text": "upon"}]}])";
  // continue_final_message: the reply continues the assistant message, which echo repeats (text
  // parts joined with "\n", as vLLM's conversation holds them).
  const ApiRequest cont = parse(kChat, "{" + continued + R"(, "continue_final_message": true, "echo": true})");
  EXPECT_EQ(cont.response_role, "assistant");
  EXPECT_EQ(cont.echoed_message, "Once\nupon");
  // With the generation prompt the reply is a new assistant turn; the last message is the
  // assistant's, so vLLM still echoes it.
  EXPECT_EQ(parse(kChat, "{" + continued + R"(, "echo": true})").echoed_message, "Once\nupon");
  const std::string user_last = R"("messages": [{"role": "user", "content": "Hi"}])";
  const ApiRequest plain = parse(kChat, "{" + user_last + R"(, "echo": true})");
  EXPECT_EQ(plain.response_role, "assistant");
  EXPECT_EQ(plain.echoed_message, "");  // a user message is not the reply's role
  // Without the generation prompt the reply has the last message's role (vLLM's
  // get_chat_request_role), and echo repeats it.
  const ApiRequest no_prompt = parse(kChat, "{" + user_last + R"(, "add_generation_prompt": false, "echo": true})");
  EXPECT_EQ(no_prompt.response_role, "user");
  EXPECT_EQ(no_prompt.echoed_message, "Hi");
  EXPECT_EQ(parse(kChat, "{" + continued + "}").echoed_message, "");  // only when asked

  EXPECT_TRUE(parse(kChat, "{" + user_last + "}").parallel_tool_calls);
  EXPECT_FALSE(parse(kChat, "{" + user_last + R"(, "parallel_tool_calls": false})").parallel_tool_calls);
  const ApiRequest templ = parse(kChat, "{" + user_last + R"(, "chat_template": "{{ messages[0].content }}"})");
  EXPECT_EQ(templ.prompts.at(0).chat_template, "{{ messages[0].content }}");
  EXPECT_EQ(parse(kChat, "{" + user_last + "}").prompts.at(0).chat_template, "");

  for (ApiEndpoint e : {kCompletions, kChat}) {
    const std::string head = e == kChat ? user_last : std::string(R"("prompt": "x")");
    const ApiRequest cu = parse(e, "{" + head + R"(, "stream": true, "stream_options": {"include_usage": true,
        "continuous_usage_stats": true}})");
    EXPECT_TRUE(cu.include_usage && cu.continuous_usage_stats);
  }
}

// Chat echo: the echoed message heads every choice's content, streamed (a role chunk, then the
// echo, as vLLM's) and not; the streamed pieces add up to the response's content.
TEST_F(FormatterTest, ChatEchoStreamedAndNot) {
  ApiRequest req = parse(kChat, R"({"messages": [{"role": "user", "content": "Go on"}, {"role": "assistant",
      "content": "Once upon"}], "continue_final_message": true, "echo": true, "n": 2, "stream": true})");
  const RequestOutput full = result({tokenizer_->encode(" a time", false), tokenizer_->encode(" two", false)}, false);
  ApiFormatter whole(req, *door_, "chatcmpl-1", 5, "m", {"Hello"});
  const Json body = whole.response({full});
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Once upon a time");
  EXPECT_EQ(body["choices"][1]["message"]["content"], "Once upon two");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");

  ApiFormatter streamer(req, *door_, "chatcmpl-1", 5, "m", {"Hello"});
  std::vector<std::vector<Json>> deltas_by_choice(2);
  for (const RequestOutput& d : deltas(full))
    for (const Json& chunk : streamer.stream_chunks(0, d))
      for (const Json& choice : chunk["choices"]) deltas_by_choice[choice["index"].get<size_t>()].push_back(choice);
  for (size_t c = 0; c < 2; ++c) {
    const std::vector<Json>& got = deltas_by_choice[c];
    ASSERT_GE(got.size(), 3u);
    EXPECT_EQ(got[0]["delta"], (Json{{"role", "assistant"}, {"content", ""}}));
    EXPECT_EQ(got[1]["delta"], (Json{{"content", "Once upon"}}));
    EXPECT_FALSE(got[2]["delta"].contains("role"));  // the role is sent once
    std::string content;
    for (const Json& choice : got)
      if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
    EXPECT_EQ(content, body["choices"][c]["message"]["content"]) << c;
  }
  // Without a generation prompt the reply takes the last message's role.
  ApiRequest user = parse(kChat, R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false,
      "echo": true})");
  ApiFormatter as_user(user, *door_, "chatcmpl-2", 5, "m", {"Hello"});
  const Json reply = as_user.response({result({tokenizer_->encode(" there", false)}, false)});
  EXPECT_EQ(reply["choices"][0]["message"]["role"], "user");
  EXPECT_EQ(reply["choices"][0]["message"]["content"], "Hi there");
}

// parallel_tool_calls false: one tool call per choice (the first), streamed and not, and the
// finish reason is still "tool_calls" (vLLM's maybe_filter_parallel_tool_calls).
TEST_F(FormatterTest, ParallelToolCallsFalseReturnsTheFirstCallOnly) {
  ApiRequest req = parse(kChat, R"({"messages": [{"role": "user", "content": "hi"}], "stream": true,
      "parallel_tool_calls": false})");
  req.parsers = ChatOutputParsers{};
  req.parsers.tool_call_parser = ToolCallParser::kHermes;
  const std::string text =
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
      "\"arguments\": {}}\n</tool_call>";
  const std::vector<int32_t> ids = tokenizer_->encode(text, false);
  const RequestOutput full = through_output_processor(ids, req.parsers, RequestOutputKind::kFinalOnly).at(0);
  ASSERT_EQ(full.outputs[0].message->tool_calls.size(), 2u);  // the model made two
  ApiFormatter whole(req, *door_, "chatcmpl-7", 5, "m", {"Hello"});
  const Json body = whole.response({full});
  ASSERT_EQ(body["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "a");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");

  ApiFormatter streamer(req, *door_, "chatcmpl-7", 5, "m", {"Hello"});
  Json calls = Json::array();
  std::string finish;
  for (const RequestOutput& delta : through_output_processor(ids, req.parsers, RequestOutputKind::kDelta))
    for (const Json& chunk : streamer.stream_chunks(0, delta)) {
      const Json& choice = chunk["choices"][0];
      if (choice["delta"].contains("tool_calls"))
        for (const Json& c : choice["delta"]["tool_calls"]) calls.push_back(c);
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "a");
  EXPECT_EQ(finish, "tool_calls");
  // By default both are returned.
  ApiRequest both = req;
  both.parallel_tool_calls = true;
  EXPECT_EQ(ApiFormatter(both, *door_, "chatcmpl-7", 5, "m", {"Hello"})
                .response({full})["choices"][0]["message"]["tool_calls"]
                .size(),
            2u);
}

// stream_options.continuous_usage_stats: every chunk's usage is its prompt's tokens and its
// choice's completion tokens so far (vLLM's); only with include_usage; the final usage chunk stays.
TEST_F(FormatterTest, ContinuousUsageStatsInEveryChunk) {
  for (ApiEndpoint endpoint : {kCompletions, kChat}) {
    const std::string head =
        endpoint == kChat ? R"("messages": [{"role": "user", "content": "hi"}])" : R"("prompt": "Hello")";
    ApiRequest req = parse(endpoint, "{" + head + R"(, "n": 2, "stream": true, "stream_options":
        {"include_usage": true, "continuous_usage_stats": true}})");
    const RequestOutput full =
        result({tokenizer_->encode(" big world", false), tokenizer_->encode(" é!", false)}, false);
    const int64_t prompt_tokens = static_cast<int64_t>(full.prompt_token_ids.size());
    ApiFormatter streamer(req, *door_, "x-1", 5, "m", {"Hello"});
    std::vector<int64_t> seen(2, 0);
    size_t num_chunks = 0;
    for (const RequestOutput& d : deltas(full))
      for (const Json& chunk : streamer.stream_chunks(0, d)) {
        ++num_chunks;
        const Json& choice = chunk["choices"][0];
        const size_t c = choice["index"].get<size_t>();
        const Json& u = chunk["usage"];
        ASSERT_TRUE(u.is_object()) << chunk.dump();
        EXPECT_EQ(u["prompt_tokens"], prompt_tokens);
        EXPECT_GE(u["completion_tokens"].get<int64_t>(), seen[c]);  // tokens so far, never fewer
        seen[c] = u["completion_tokens"].get<int64_t>();
        EXPECT_EQ(u["total_tokens"], prompt_tokens + seen[c]);
      }
    EXPECT_GT(num_chunks, 0u);
    for (size_t c = 0; c < 2; ++c) EXPECT_EQ(seen[c], static_cast<int64_t>(full.outputs[c].token_ids.size()));
    EXPECT_EQ(streamer.usage_chunk()["usage"]["completion_tokens"],
              full.outputs[0].token_ids.size() + full.outputs[1].token_ids.size());
    // Without include_usage continuous_usage_stats adds nothing (vLLM's should_include_usage).
    req.include_usage = false;
    ApiFormatter plain(req, *door_, "x-1", 5, "m", {"Hello"});
    for (const Json& chunk : plain.stream_chunks(0, full)) EXPECT_FALSE(chunk.contains("usage")) << chunk.dump();
  }
}

// The server's system_fingerprint is in every response body and every stream chunk, usage chunk
// included; without one (a formatter outside the server) the field is left out.
TEST_F(FormatterTest, SystemFingerprintInEveryBodyAndChunk) {
  for (ApiEndpoint endpoint : {kCompletions, kChat}) {
    const std::string head =
        endpoint == kChat ? R"("messages": [{"role": "user", "content": "hi"}])" : R"("prompt": "Hello")";
    ApiRequest req = parse(endpoint, "{" + head + R"(, "stream": true, "stream_options": {"include_usage": true}})");
    req.system_fingerprint = "fp_0123456789abcdef";
    const RequestOutput full = result({tokenizer_->encode(" big world", false)}, false);
    ApiFormatter f(req, *door_, "x-1", 5, "m", {"Hello"});
    EXPECT_EQ(f.response({full})["system_fingerprint"], "fp_0123456789abcdef");
    size_t n = 0;
    for (const RequestOutput& d : deltas(full))
      for (const Json& chunk : f.stream_chunks(0, d)) {
        EXPECT_EQ(chunk["system_fingerprint"], "fp_0123456789abcdef") << chunk.dump();
        ++n;
      }
    EXPECT_GT(n, 0u);
    EXPECT_EQ(f.usage_chunk()["system_fingerprint"], "fp_0123456789abcdef");
    req.system_fingerprint.clear();
    EXPECT_FALSE(ApiFormatter(req, *door_, "x-1", 5, "m", {"Hello"}).response({full}).contains("system_fingerprint"));
  }
}

// vLLM's ErrorResponse: type the exception's name, code the HTTP status (an integer).
TEST(OpenAiApiTest, ErrorBodyShape) {
  const Json b = to_api_error(Error(ErrorCode::kNotFound, "The model `x` does not exist.", "model")).body();
  EXPECT_EQ(b, Json::parse(R"({"error": {"message": "The model `x` does not exist.", "type": "NotFoundError",
      "param": "model", "code": 404}})"));
  const Json bad = to_api_error(Error(ErrorCode::kInvalidArgument, "bad top_p", "top_p")).body();
  EXPECT_EQ(bad["error"]["type"], "BadRequestError");
  EXPECT_EQ(bad["error"]["code"], 400);
  EXPECT_EQ(bad["error"]["param"], "top_p");
  const Json internal = to_api_error(Error(ErrorCode::kInternal, "x")).body();
  EXPECT_EQ(internal["error"]["type"], "InternalServerError");
  EXPECT_EQ(internal["error"]["code"], 500);
  EXPECT_TRUE(internal["error"]["param"].is_null());
  EXPECT_EQ(to_api_error(Error(ErrorCode::kUnauthenticated, "x")).status(), 401);
}

TEST(OpenAiApiTest, BearerTokenMatchesTheKeyExactlyAndTheSchemeInAnyCase) {
  EXPECT_TRUE(bearer_token_matches("Bearer sekret", "sekret"));
  EXPECT_TRUE(bearer_token_matches("bearer sekret", "sekret"));
  EXPECT_TRUE(bearer_token_matches("BEARER sekret", "sekret"));
  for (const char* wrong : {"Bearer SEKRET", "Bearer sekre", "Bearer sekrets", "Bearer sekret ", "Bearersekret",
                            "Basic sekret", "sekret", "", "Bearer ", "Bearer  sekret", "Bearer sekreu"})
    EXPECT_FALSE(bearer_token_matches(wrong, "sekret")) << wrong;
  EXPECT_FALSE(bearer_token_matches("Bearer ", ""));  // no key configured matches nothing
}

}  // namespace
}  // namespace ditto
