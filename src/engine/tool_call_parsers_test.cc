#include "engine/tool_call_parsers.h"

#include <gtest/gtest.h>

namespace ditto {
namespace {

TEST(ToolCallParsersTest, NamesAreVllms) {
  EXPECT_EQ(tool_call_parser_named("hermes"), ToolCallParser::kHermes);
  EXPECT_EQ(tool_call_parser_named("llama3_json"), ToolCallParser::kLlama3Json);
  EXPECT_EQ(tool_call_parser_named("qwen3_coder"), ToolCallParser::kQwen3Coder);
  EXPECT_FALSE(tool_call_parser_named("llama4_json"));
  EXPECT_FALSE(tool_call_parser_named("Hermes"));
}

TEST(ToolCallParsersTest, ParameterTypesComeFromTheTools) {
  const ToolParameterTypes types = tool_parameter_types(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
      "a": {"type": "Integer"}, "b": {"type": ["null", "number"]}, "c": {"description": "no type"}}}}},
    {"type": "function", "function": {"name": "g", "parameters": {"x": {"type": "boolean"}}}},
    {"type": "function", "function": {"name": "h"}}, 5])");
  EXPECT_EQ(types.at("f").at("a"), "integer");
  EXPECT_EQ(types.at("f").at("b"), "number");
  EXPECT_FALSE(types.at("f").contains("c"));
  EXPECT_EQ(types.at("g").at("x"), "boolean");  // a schema without "properties" is read as them
  EXPECT_FALSE(types.contains("h"));
  EXPECT_TRUE(tool_parameter_types("not json").empty());
  EXPECT_TRUE(tool_parameter_types("").empty());
}

// vLLM's qwen3_coder conversions, one parameter of each type.
TEST(ToolCallParsersTest, Qwen3CoderConvertsValuesByType) {
  const ToolParameterTypes types = {{"f",
                                     {{"s", "string"},
                                      {"e", "enum"},
                                      {"i", "integer"},
                                      {"u", "uint32"},
                                      {"n", "number"},
                                      {"w", "float"},
                                      {"b", "boolean"},
                                      {"o", "object"},
                                      {"l", "array"},
                                      {"bad_i", "int"},
                                      {"bad_n", "number"},
                                      {"bad_o", "object"},
                                      {"odd", "bool"},
                                      {"nul", "integer"}}}};
  auto args = [&](std::string_view param, std::string_view value) {
    const std::string body =
        "<function=f><parameter=" + std::string(param) + ">\n" + std::string(value) + "\n</parameter></function>";
    const auto calls = parse_qwen3_coder_calls(body, types);
    EXPECT_TRUE(calls && calls->size() == 1) << body;
    return calls && !calls->empty() ? (*calls)[0].arguments : "";
  };
  EXPECT_EQ(args("s", "42"), R"({"s":"42"})");
  EXPECT_EQ(args("e", "red"), R"({"e":"red"})");
  EXPECT_EQ(args("i", " -7 "), R"({"i":-7})");
  EXPECT_EQ(args("u", "+12"), R"({"u":12})");
  EXPECT_EQ(args("n", "2.5"), R"({"n":2.5})");
  EXPECT_EQ(args("w", "3.0"), R"({"w":3})");  // a whole number is an integer
  EXPECT_EQ(args("b", "True"), R"({"b":true})");
  EXPECT_EQ(args("odd", "yes"), R"({"odd":false})");  // not "true": false, as vLLM
  EXPECT_EQ(args("o", R"({"k": [1, 2]})"), R"({"o":{"k":[1,2]}})");
  EXPECT_EQ(args("l", "[1, \"a\"]"), R"({"l":[1,"a"]})");
  EXPECT_EQ(args("bad_i", "seven"), R"({"bad_i":"seven"})");  // not its type: the text
  EXPECT_EQ(args("bad_n", "1.2.3"), R"({"bad_n":"1.2.3"})");
  EXPECT_EQ(args("bad_o", "{oops"), R"({"bad_o":"{oops"})");
  EXPECT_EQ(args("nul", "NULL"), R"({"nul":null})");
  EXPECT_EQ(args("unknown", "5"), R"({"unknown":"5"})");  // not in the schema: the text
  // Only one newline is dropped from each end; other whitespace is the value's.
  EXPECT_EQ(args("s", "\n two \n"), "{\"s\":\"\\n two \\n\"}");
}

TEST(ToolCallParsersTest, HermesBodies) {
  const auto call = parse_hermes_call(R"({"name": "f", "arguments": "{\"a\": 1}"})");
  ASSERT_TRUE(call);
  EXPECT_EQ(call->arguments, "{\"a\": 1}");  // a string is taken as the arguments' text
  EXPECT_FALSE(parse_hermes_call(R"({"name": "f", "arguments": 3})"));
  EXPECT_FALSE(parse_hermes_call(R"(["f"])"));
}

}  // namespace
}  // namespace ditto
