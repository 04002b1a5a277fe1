// response_format and tool_choice "required" / named, parsed into the engine's
// StructuredOutputsParams (each error naming the field at fault), and the tool calls read back
// from a constrained output, streamed and not.
#include "server/structured_output_api.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/json_input.h"
#include "server/openai_api.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

constexpr auto kCompletions = ApiEndpoint::kCompletions;
constexpr auto kChat = ApiEndpoint::kChatCompletions;
const std::string kMessages = R"("messages": [{"role": "user", "content": "hi"}])";
const std::string kTools =
    R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "now"}}])";

ApiRequest parse(ApiEndpoint e, const std::string& body) { return parse_api_request(e, Json::parse(body)); }
ApiRequest chat(const std::string& fields) { return parse(kChat, "{" + kMessages + ", " + fields + "}"); }

// The param and message of the 400 that parsing `fields` (beside the messages) gives.
std::pair<std::string, std::string> chat_error(const std::string& fields) {
  try {
    chat(fields);
  } catch (const Error& e) {
    const ApiError api = to_api_error(e);
    EXPECT_EQ(api.status(), 400) << fields;
    return {e.param(), e.what()};
  }
  ADD_FAILURE() << "no error for " << fields;
  return {};
}

TEST(StructuredOutputApiTest, ResponseFormatKinds) {
  EXPECT_FALSE(chat(R"("response_format": {"type": "text"})").params.structured_outputs);
  const ApiRequest object = chat(R"("response_format": {"type": "json_object"})");
  ASSERT_TRUE(object.params.structured_outputs);
  EXPECT_TRUE(object.params.structured_outputs->json_object);
  EXPECT_EQ(object.constraint_field, "response_format");
  for (const char* strict : {"true", "false"}) {  // both constrain
    const ApiRequest schema = chat(std::string(R"("response_format": {"type": "json_schema", "json_schema": {"name":
        "person", "description": "a person", "strict": )") +
                                   strict + R"(, "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}})");
    ASSERT_TRUE(schema.params.structured_outputs);
    // Key order kept: the grammar engine writes properties in the schema's order.
    EXPECT_EQ(*schema.params.structured_outputs->json, R"({"type":"object","properties":{"b":{},"a":{}}})");
    EXPECT_EQ(schema.constraint_field, "response_format.json_schema.schema");
  }
  const ApiRequest tag = chat(R"("response_format": {"type": "structural_tag", "structures": [], "triggers": []})");
  ASSERT_TRUE(tag.params.structured_outputs && tag.params.structured_outputs->structural_tag);
  EXPECT_EQ(Json::parse(*tag.params.structured_outputs->structural_tag)["type"], "structural_tag");
  // /v1/completions takes it too.
  const ApiRequest completion = parse(kCompletions, R"({"prompt": "x", "response_format": {"type": "json_object"}})");
  EXPECT_TRUE(completion.params.structured_outputs && completion.params.structured_outputs->json_object);
  // structured_outputs options without a kind take response_format's (vLLM's merge).
  const ApiRequest merged = chat(R"("structured_outputs": {"disable_any_whitespace": true},
      "response_format": {"type": "json_object"})");
  ASSERT_TRUE(merged.params.structured_outputs);
  EXPECT_TRUE(merged.params.structured_outputs->json_object &&
              merged.params.structured_outputs->disable_any_whitespace);
  // The guided_* fields name themselves when their constraint does not compile.
  EXPECT_EQ(chat(R"("guided_regex": "[a-z]+")").constraint_field, "guided_regex");
  EXPECT_EQ(chat(R"("structured_outputs": {"regex": "[a-z]+"})").constraint_field, "");
}

TEST(StructuredOutputApiTest, ResponseFormatErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("response_format": "json")", "response_format"},
      {R"("response_format": {"schema": {}})", "response_format"},
      {R"("response_format": {"type": "yaml"})", "response_format.type"},
      {R"("response_format": {"type": "json_schema"})", "response_format.json_schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": 3})", "response_format.json_schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}}})",
       "response_format.json_schema.name"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})",
       "response_format.json_schema.schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": "{}"}})",
       "response_format.json_schema.schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": "yes", "schema": {}}})",
       "response_format.json_schema.strict"},
      {R"("response_format": {"type": "json_object"}, "guided_json": {"type": "object"})", "response_format"},
      {R"("response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"})", "response_format"},
      {R"("response_format": {"type": "json_object"}, "use_beam_search": true)", "response_format"},
  };
  for (const auto& [fields, param] : cases) {
    const auto [got, message] = chat_error(fields);
    EXPECT_EQ(got, param) << fields << " -> " << message;
  }
  EXPECT_NE(chat_error(R"("response_format": {"type": "json_object"}, "guided_json": {})").second.find("guided_json"),
            std::string::npos);
}

TEST(StructuredOutputApiTest, NamedToolChoiceConstrainsToTheToolsParameters) {
  const ApiRequest r = chat(kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(r.forced_tool_choice, ForcedToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "get_weather");
  EXPECT_FALSE(r.tool_choice_none);
  ASSERT_TRUE(r.params.structured_outputs && r.params.structured_outputs->json);
  EXPECT_EQ(Json::parse(*r.params.structured_outputs->json)["required"], Json::array({"city"}));
  EXPECT_EQ(r.constraint_field, "tools");
  // A function without parameters takes an object.
  const ApiRequest now = chat(kTools + R"(, "tool_choice": {"function": {"name": "now"}})");
  EXPECT_EQ(Json::parse(*now.params.structured_outputs->json), Json::parse(R"({"type":"object","properties":{}})"));
}

TEST(StructuredOutputApiTest, RequiredToolChoiceIsAnArrayOfCalls) {
  const ApiRequest r = chat(kTools + R"(, "tool_choice": "required")");
  EXPECT_EQ(r.forced_tool_choice, ForcedToolChoice::kRequired);
  const Json schema = Json::parse(*r.params.structured_outputs->json);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  const Json& any_of = schema["items"]["anyOf"];
  ASSERT_EQ(any_of.size(), 2u);
  EXPECT_EQ(any_of[0]["properties"]["name"]["enum"], Json::array({"get_weather"}));
  EXPECT_EQ(any_of[0]["properties"]["parameters"]["required"], Json::array({"city"}));
  EXPECT_EQ(any_of[1]["properties"]["parameters"], Json::parse(R"({"type":"object","properties":{}})"));
  EXPECT_EQ(any_of[1]["required"], Json::array({"name", "parameters"}));
  // "required" with no tools is "none" (OpenAI's, vLLM's).
  const ApiRequest empty = chat(R"("tools": [], "tool_choice": "required")");
  EXPECT_EQ(empty.forced_tool_choice, ForcedToolChoice::kNone);
  EXPECT_TRUE(empty.tool_choice_none && !empty.params.structured_outputs);
  // $defs are lifted to the root, where "#/$defs/..." resolves.
  const ApiRequest defs = chat(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type":
      "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "integer"}}}}}],
      "tool_choice": "required")");
  const Json d = Json::parse(*defs.params.structured_outputs->json);
  EXPECT_EQ(d["$defs"]["P"]["type"], "integer");
  EXPECT_FALSE(d["items"]["anyOf"][0]["properties"]["parameters"].contains("$defs"));
}

TEST(StructuredOutputApiTest, ToolChoiceErrorsNameTheField) {
  const std::pair<std::string, const char*> cases[] = {
      {kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "missing"}})", "tool_choice"},
      {kTools + R"(, "tool_choice": {"type": "function"})", "tool_choice"},
      {kTools + R"(, "tool_choice": {"type": "function", "function": {"name": ""}})", "tool_choice"},
      {kTools + R"(, "tool_choice": {"type": "custom", "function": {"name": "now"}})", "tool_choice"},
      {R"("tool_choice": "required")", "tool_choice"},
      {R"("tool_choice": {"type": "function", "function": {"name": "f"}})", "tool_choice"},
      {kTools + R"(, "tool_choice": "required", "response_format": {"type": "json_object"})", "tool_choice"},
      {kTools + R"(, "tool_choice": "required", "guided_regex": "a")", "tool_choice"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}], "tool_choice": "required")",
       "tools"},
      {R"("tools": [{"type": "function", "function": {"name": 5}}], "tool_choice": "required")", "tools"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"$defs": {"P": {}}}}},
          {"type": "function", "function": {"name": "g", "parameters": {"$defs": {"P": {"type": "string"}}}}}],
          "tool_choice": "required")",
       "tools"},
  };
  for (const auto& [fields, param] : cases) {
    const auto [got, message] = chat_error(fields);
    EXPECT_EQ(got, param) << fields << " -> " << message;
  }
}

TEST(StructuredOutputApiTest, RequiredToolCallsParse) {
  const auto calls = parse_required_tool_calls(
      R"([{"name": "get_weather", "parameters": {"city": "Zürich", "days": [1, 2]}}, {"name":"now","parameters":{}}])");
  ASSERT_TRUE(calls);
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].name, "get_weather");
  EXPECT_EQ((*calls)[0].arguments, R"({"city": "Zürich", "days": [1, 2]})");  // Python's json.dumps, as vLLM's
  EXPECT_EQ((*calls)[1].arguments, "{}");
  for (const char* bad : {R"([{"name": "f", "parameters": {"a": )", "{}", R"([{"parameters": {}}])", "", "[1]"})
    EXPECT_FALSE(parse_required_tool_calls(bad)) << bad;
}

TEST(StructuredOutputApiTest, CompileErrorsAreRenamedToTheRequestsField) {
  const Error engine(ErrorCode::kInvalidArgument, "structured_outputs.json: unknown keyword \"foo\"",
                     "structured_outputs.json");
  auto renamed = [&](const std::string& field, const Error& e) -> Error {
    try {
      try {
        throw e;
      } catch (const Error& caught) {
        rethrow_naming_constraint_field(caught, field);
      }
    } catch (const Error& out) {
      return out;
    }
    return Error(ErrorCode::kInternal, "not thrown");
  };
  const Error r = renamed("response_format.json_schema.schema", engine);
  EXPECT_EQ(r.param(), "response_format.json_schema.schema");
  EXPECT_EQ(std::string(r.what()), "response_format.json_schema.schema: unknown keyword \"foo\"");
  EXPECT_EQ(renamed("", engine).param(), "structured_outputs.json");  // structured_outputs names itself
  const Error other(ErrorCode::kInvalidArgument, "too long", "max_tokens");
  EXPECT_EQ(renamed("tools", other).param(), "max_tokens");
}

// A body nested too deep names its top-level field (the parse refuses it before any recursion).
TEST(StructuredOutputApiTest, DeepBodyNamesItsField) {
  std::string deep = R"({"model": "m", "response_format": )";
  for (int i = 0; i < 10000; ++i) deep += "[";
  for (int i = 0; i < 10000; ++i) deep += "]";
  deep += "}";
  try {
    parse_json_input<Json>(deep, "request body");
    ADD_FAILURE() << "parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.param(), "response_format");
    EXPECT_NE(std::string(e.what()).find("nested deeper than"), std::string::npos) << e.what();
  }
}

// The formatter: a named call carries the output as its arguments (finish_reason stays "stop", as
// vLLM's), "required" calls are parsed ("tool_calls"); streamed chunks reassemble to the same calls.
TEST(StructuredOutputApiTest, ForcedToolCallsAreFormattedStreamedAndNot) {
  const std::vector<std::string> pieces = {R"([{"name": "get_)", R"(weather", "parameters": {"ci)",
                                           R"(ty": "Paris"}}])"};
  std::string text;
  for (const std::string& p : pieces) text += p;
  for (const bool named : {true, false}) {
    ApiRequest r =
        chat(kTools + (named ? R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"
                             : R"(, "tool_choice": "required")"));
    // The formatter reads the door only for echo with logprobs: none here.
    const InputProcessor door({.vocab_size = 64, .max_model_len = 64, .num_kv_blocks = 4}, nullptr, nullptr);
    r.stream = false;
    RequestOutput whole;
    whole.finished = true;
    CompletionOutput c;
    c.text = named ? R"({"city": "Paris"})" : text;
    c.finish_reason = "stop";
    whole.outputs.push_back(c);
    ApiFormatter f(r, door, "chatcmpl-x", 0, "m", {""});
    const Json body = f.response({whole});
    const Json& choice = body["choices"][0];
    EXPECT_EQ(choice["message"]["content"], "");
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << body.dump();
    EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris"})");
    EXPECT_EQ(choice["finish_reason"], named ? "stop" : "tool_calls");

    // Streamed: the named call's arguments as deltas; the required calls in the last chunk.
    r.stream = true;
    ApiFormatter s(r, door, "chatcmpl-x", 0, "m", {""});
    const std::vector<std::string> stream_pieces =
        named ? std::vector<std::string>{R"({"ci)", R"(ty": )", R"("Paris"})"} : pieces;
    Json call = {{"function", {{"arguments", ""}}}};
    std::string finish;
    for (size_t i = 0; i < stream_pieces.size(); ++i) {
      RequestOutput report;
      CompletionOutput d;
      d.text = stream_pieces[i];
      d.token_ids = {1};
      if (i + 1 == stream_pieces.size()) d.finish_reason = "stop";
      report.outputs.push_back(d);
      for (const Json& chunk : s.stream_chunks(0, report)) {
        const Json& ch = chunk["choices"][0];
        if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        if (!ch["delta"].contains("tool_calls")) continue;
        for (const Json& t : ch["delta"]["tool_calls"]) {
          EXPECT_EQ(t["index"], 0);
          if (t.contains("id")) call["id"] = t["id"];
          if (t["function"].contains("name")) call["function"]["name"] = t["function"]["name"];
          call["function"]["arguments"] =
              call["function"]["arguments"].get<std::string>() + t["function"]["arguments"].get<std::string>();
        }
      }
    }
    EXPECT_EQ(call["id"], choice["message"]["tool_calls"][0]["id"]);
    EXPECT_EQ(call["function"]["name"], choice["message"]["tool_calls"][0]["function"]["name"]);
    EXPECT_EQ(call["function"]["arguments"], choice["message"]["tool_calls"][0]["function"]["arguments"]);
    EXPECT_EQ(finish, choice["finish_reason"]);
  }
}

}  // namespace
}  // namespace ditto
