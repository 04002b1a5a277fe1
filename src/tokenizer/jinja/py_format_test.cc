// Python's text forms (float repr, str repr, json.dumps), expected values from CPython 3.11.
#include "tokenizer/jinja/py_format.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tokenizer/jinja/error.h"

namespace ditto::jinja {
namespace {

Value json(const char* text) { return Value::from_json(nlohmann::ordered_json::parse(text)); }

TEST(PyFormat, FloatReprIsShortestRoundTrip) {
  EXPECT_EQ(py_float_repr(0.1), "0.1");
  EXPECT_EQ(py_float_repr(1e16), "1e+16");
  EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(py_float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(py_float_repr(1e-5), "1e-05");
  EXPECT_EQ(py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(py_float_repr(-0.0), "-0.0");
  EXPECT_EQ(py_float_repr(1.5), "1.5");
  EXPECT_EQ(py_float_repr(std::ldexp(1.0, 70)), "1.1805916207174113e+21");
  EXPECT_EQ(py_float_repr(5e-324), "5e-324");
  EXPECT_EQ(py_float_repr(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(py_float_repr(INFINITY), "inf");
}

TEST(PyFormat, StringReprPicksQuotesAndEscapes) {
  EXPECT_EQ(py_string_repr("it's"), "\"it's\"");
  EXPECT_EQ(py_string_repr("a\"b"), "'a\"b'");
  EXPECT_EQ(py_string_repr("both'\""), "'both\\'\"'");
  EXPECT_EQ(py_string_repr("tab\tnl\n\x01\x7f\u00a0\u00e9\U0001F600\u2028\u200b"),
            "'tab\\tnl\\n\\x01\\x7f\\xa0\u00e9\U0001F600\\u2028\\u200b'");
}

TEST(PyFormat, StrOfContainersUsesRepr) {
  EXPECT_EQ(py_str(json(R"([1, "a", null, true, 1.0, {"k": [2]}])")), "[1, 'a', None, True, 1.0, {'k': [2]}]");
  EXPECT_EQ(py_str(Value::tuple({Value(1)})), "(1,)");
  EXPECT_EQ(py_str(Value()), "");
}

TEST(PyFormat, JsonDumpsMatchesPython) {
  JsonOptions compact;
  EXPECT_EQ(py_json_dumps(json(R"({"a": [1, {"b": null}], "é": "x\u2028\u0001\"\\"})"), compact),
            "{\"a\": [1, {\"b\": null}], \"\u00e9\": \"x\u2028\\u0001\\\"\\\\\"}");
  JsonOptions ascii_indent;
  ascii_indent.ensure_ascii = true;
  ascii_indent.indent = "  ";
  EXPECT_EQ(py_json_dumps(json(R"({"a": [1, {"b": null}], "é": "😀"})"), ascii_indent),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"\\u00e9\": \"\\ud83d\\ude00\"\n}");
  JsonOptions tight;
  tight.indent = "";
  tight.item_separator = ",";
  tight.key_separator = ":";
  EXPECT_EQ(py_json_dumps(json(R"({"a": [], "b": {}})"), tight), "{\n\"a\":[],\n\"b\":{}\n}");
  Dict keys;
  keys.set(Value(1), Value("x"));
  keys.set(Value(true), Value("y"));  // True == 1: the same key, as in Python
  keys.set(Value::none(), Value("z"));
  keys.set(Value(1.5), Value("w"));
  EXPECT_EQ(py_json_dumps(Value::dict(keys), compact), "{\"1\": \"y\", \"null\": \"z\", \"1.5\": \"w\"}");
  EXPECT_THROW(py_json_dumps(Value(), compact), RuntimeError);
}

TEST(PyFormat, PercentFormat) {
  EXPECT_EQ(py_percent_format("%s-%d-%05.1f-%x-%%", Value::tuple({Value("a"), Value(3), Value(2.25), Value(255)})),
            "a-3-002.2-ff-%");
  EXPECT_THROW(py_percent_format("%s %s", Value("one")), RuntimeError);
}

}  // namespace
}  // namespace ditto::jinja
