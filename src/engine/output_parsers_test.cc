#include "engine/output_parsers.h"

#include <gtest/gtest.h>

#include <random>

namespace ditto {
namespace {

ChatOutputParsers parsers_of(bool reasoning, ToolCallParser tools, std::string tools_json = "") {
  ChatOutputParsers p;
  p.reasoning = reasoning;
  p.tool_call_parser = tools;
  p.tools = std::move(tools_json);
  return p;
}

const ChatOutputParsers kBoth = parsers_of(true, ToolCallParser::kHermes);
const ChatOutputParsers kHermes = parsers_of(false, ToolCallParser::kHermes);
const ChatOutputParsers kLlama = parsers_of(false, ToolCallParser::kLlama3Json);
const ChatOutputParsers kCoder =
    parsers_of(false, ToolCallParser::kQwen3Coder,
               R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");

void expect_calls(const ChatMessageParts& m, const std::vector<std::pair<std::string, std::string>>& calls) {
  ASSERT_EQ(m.tool_calls.size(), calls.size());
  for (size_t k = 0; k < calls.size(); ++k) {
    EXPECT_EQ(m.tool_calls[k].name, calls[k].first) << k;
    EXPECT_EQ(m.tool_calls[k].arguments, calls[k].second) << k;
  }
}

// The text fed in pieces of `cut` bytes (the last piece marked finished), the pieces concatenated.
ChatMessageParts fed_in_pieces(std::string_view text, size_t cut, const ChatOutputParsers& parsers) {
  ChatOutputParser parser(parsers);
  ChatMessageParts sum;
  for (size_t at = 0;; at += cut) {
    const bool last = at + cut >= text.size();
    ChatMessageParts piece = parser.feed(text.substr(std::min(at, text.size()), cut), last);
    sum.reasoning += piece.reasoning;
    sum.content += piece.content;
    for (ToolCall& c : piece.tool_calls) sum.tool_calls.push_back(std::move(c));
    if (last) return sum;
  }
}

// The same message whole and streamed at every cut into two pieces, and byte by byte.
void expect_same_streamed(std::string_view text, const ChatOutputParsers& parsers) {
  const ChatMessageParts whole = parse_chat_output(text, true, parsers);
  auto same = [&](const ChatMessageParts& got, const std::string& how) {
    EXPECT_EQ(got.reasoning, whole.reasoning) << how;
    EXPECT_EQ(got.content, whole.content) << how;
    ASSERT_EQ(got.tool_calls.size(), whole.tool_calls.size()) << how;
    for (size_t k = 0; k < got.tool_calls.size(); ++k) {
      EXPECT_EQ(got.tool_calls[k].name, whole.tool_calls[k].name) << how;
      EXPECT_EQ(got.tool_calls[k].arguments, whole.tool_calls[k].arguments) << how;
    }
  };
  same(fed_in_pieces(text, 1, parsers), "byte by byte");
  for (size_t split = 0; split <= text.size(); ++split) {
    ChatOutputParser parser(parsers);
    ChatMessageParts a = parser.feed(text.substr(0, split), false);
    const ChatMessageParts b = parser.feed(text.substr(split), true);
    a.reasoning += b.reasoning;
    a.content += b.content;
    a.tool_calls.insert(a.tool_calls.end(), b.tool_calls.begin(), b.tool_calls.end());
    same(a, "split at " + std::to_string(split));
  }
}

TEST(OutputParsersTest, SplitsReasoningContentAndToolCalls) {
  const std::string text =
      "<think>\nweigh it up\n</think>\n\nLet me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Zürich\"}}\n</tool_call>\n<tool_call>{\"name\": \"now\"}</tool_call>";
  const ChatMessageParts v = parse_chat_output(text, true, kBoth);
  EXPECT_EQ(v.reasoning, "\nweigh it up\n");
  EXPECT_EQ(v.content, "\n\nLet me check.\n");
  expect_calls(v, {{"get_weather", "{\"city\":\"Zürich\"}"}, {"now", "{}"}});
  expect_same_streamed(text, kBoth);
}

// vLLM's qwen3 and deepseek_r1 rules (output_parsers.h): the output starts inside the reasoning,
// whether the model writes <think> (Qwen3's template) or the prompt did (Thinking-2507); without
// </think> it is all reasoning; enable_thinking false (qwen3) makes it all content.
TEST(OutputParsersTest, ReasoningIsOpenFromTheStart) {
  const ChatOutputParsers reasoning = parsers_of(true, ToolCallParser::kNone);
  const ChatMessageParts v = parse_chat_output("weigh it up\n</think>\n\nParis.", true, reasoning);
  EXPECT_EQ(v.reasoning, "weigh it up\n");
  EXPECT_EQ(v.content, "\n\nParis.");
  const ChatMessageParts tagged = parse_chat_output("<think>again</think>ok", true, reasoning);
  EXPECT_EQ(tagged.reasoning, "again");  // the model's own <think> is dropped
  EXPECT_EQ(tagged.content, "ok");
  const ChatMessageParts cut = parse_chat_output("still thinking, cut by max_tokens", true, reasoning);
  EXPECT_EQ(cut.reasoning, "still thinking, cut by max_tokens");
  EXPECT_TRUE(cut.content.empty());
  EXPECT_EQ(parse_chat_output("<think>cut too", true, reasoning).reasoning, "cut too");
  EXPECT_EQ(parse_chat_output("<thi", true, reasoning).reasoning, "<thi");  // not the tag: reasoning text

  ChatOutputParsers off = reasoning;
  off.thinking_disabled = true;
  const std::string tags = "<think>x</think>y";
  EXPECT_EQ(parse_chat_output(tags, true, off).content, tags);
  EXPECT_TRUE(parse_chat_output(tags, true, off).reasoning.empty());
  for (const std::string text : {"weigh\n</think>\n\nParis.", "<think>\nhm\n</think>\n\nok", "no tags"}) {
    expect_same_streamed(text, reasoning);
    expect_same_streamed(text, off);
  }
}

TEST(OutputParsersTest, OffMeansEverythingIsContent) {
  const std::string text = "<think>x</think><tool_call>{\"name\": \"f\"}</tool_call>";
  const ChatMessageParts v = parse_chat_output(text, true, {});
  EXPECT_EQ(v.content, text);
  EXPECT_TRUE(v.reasoning.empty());
  EXPECT_TRUE(v.tool_calls.empty());
}

TEST(OutputParsersTest, MalformedOrUnclosedBlocksStayText) {
  EXPECT_EQ(parse_chat_output("a<tool_call>{not json}</tool_call>b", true, kHermes).content,
            "a<tool_call>{not json}</tool_call>b");
  EXPECT_EQ(parse_chat_output("a<tool_call>{\"name\": 5}</tool_call>", true, kHermes).content,
            "a<tool_call>{\"name\": 5}</tool_call>");
  EXPECT_EQ(parse_chat_output("a<tool_call>{\"name\": \"f\"", true, kHermes).content, "a<tool_call>{\"name\": \"f\"");
  EXPECT_EQ(parse_chat_output("<think>still thinking", true, kBoth).reasoning, "still thinking");
  // Undecided text is held back while the output may go on.
  EXPECT_EQ(parse_chat_output("<thi", false, kBoth).reasoning, "");
  EXPECT_EQ(parse_chat_output("hello <tool_c", false, kHermes).content, "hello ");
  EXPECT_EQ(parse_chat_output("<think>abc</thi", false, kBoth).reasoning, "abc");
}

// llama3_json: the output is a call list when it starts with '{' or from <|python_tag|>; calls
// are ';'-separated objects with "arguments" or "parameters".
TEST(OutputParsersTest, Llama3JsonCalls) {
  const std::string one = R"({"name": "get_weather", "parameters": {"city": "Zürich"}})";
  ChatMessageParts v = parse_chat_output(one, true, kLlama);
  EXPECT_TRUE(v.content.empty());
  expect_calls(v, {{"get_weather", "{\"city\":\"Zürich\"}"}});

  const std::string several =
      "\n<|python_tag|>{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}; "
      "{\"name\": \"b\", \"parameters\": {}}\n";
  v = parse_chat_output(several, true, kLlama);
  EXPECT_EQ(v.content, "\n");
  expect_calls(v, {{"a", "{\"x\":[1,{\"y\":\"}\"}]}"}, {"b", "{}"}});

  const std::string after_text = "Let me look that up.<|python_tag|>" + one;
  v = parse_chat_output(after_text, true, kLlama);
  EXPECT_EQ(v.content, "Let me look that up.");
  expect_calls(v, {{"get_weather", "{\"city\":\"Zürich\"}"}});

  // A '{' that does not start the output is prose (vLLM's streaming rule).
  const std::string prose = "Use {\"name\": \"f\", \"parameters\": {}} like this.";
  EXPECT_EQ(parse_chat_output(prose, true, kLlama).content, prose);
  EXPECT_TRUE(parse_chat_output(prose, true, kLlama).tool_calls.empty());

  for (const std::string& text : {one, several, after_text, prose}) expect_same_streamed(text, kLlama);
  // The reasoning comes first; the calls follow </think>.
  const ChatOutputParsers both = parsers_of(true, ToolCallParser::kLlama3Json);
  v = parse_chat_output("hm</think>\n\n" + one, true, both);
  EXPECT_EQ(v.reasoning, "hm");
  expect_calls(v, {{"get_weather", "{\"city\":\"Zürich\"}"}});
}

TEST(OutputParsersTest, Llama3JsonMalformedStaysContent) {
  for (const std::string text : {R"({"name": "f", "parameters": {)",  // cut off
                                 R"({"name": "f"})",                  // neither arguments nor parameters
                                 R"({"name": 3, "parameters": {}})",  // a name that is not a string
                                 R"({"name": "f", "parameters": {}} and then some words)",  // text after the calls
                                 R"({"name": "f", "parameters": {}};; {"name": "g", "parameters": {}})",
                                 "<|python_tag|>print('hi')",  // a built-in tool's code, not JSON
                                 "{", "<|python_tag|>", "{}"}) {
    const ChatMessageParts v = parse_chat_output(text, true, kLlama);
    EXPECT_EQ(v.content, text);
    EXPECT_TRUE(v.tool_calls.empty()) << text;
    expect_same_streamed(text, kLlama);
  }
  // While the output goes on, a call region is held back whole.
  EXPECT_EQ(parse_chat_output(R"({"name": "f", "parameters": {}})", false, kLlama).content, "");
  EXPECT_EQ(parse_chat_output("  ", false, kLlama).content, "");
  EXPECT_EQ(parse_chat_output("ok <|python", false, kLlama).content, "ok ");
}

// qwen3_coder: XML-like calls, each value converted by the tool's schema type.
TEST(OutputParsersTest, Qwen3CoderCalls) {
  const std::string one =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nZürich\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n</function>\n</tool_call>";
  ChatMessageParts v = parse_chat_output(one, true, kCoder);
  EXPECT_TRUE(v.content.empty());
  expect_calls(v, {{"get_weather", "{\"city\":\"Zürich\",\"days\":3}"}});

  const std::string several = "I'll check both.\n" + one + "\n" +
                              "<tool_call>\n<function=get_weather>\n<parameter=city>\nBern\n</parameter>\n"
                              "</function>\n</tool_call>";
  v = parse_chat_output(several, true, kCoder);
  EXPECT_EQ(v.content, "I'll check both.\n\n");
  expect_calls(v, {{"get_weather", "{\"city\":\"Zürich\",\"days\":3}"}, {"get_weather", "{\"city\":\"Bern\"}"}});

  // Two functions in one block; a parameter closed by the next one; a function closed by the block.
  const std::string loose = "<tool_call><function=a><parameter=x>1<parameter=y>two</function><function=b></tool_call>";
  v = parse_chat_output(loose, true, kCoder);
  expect_calls(v, {{"a", "{\"x\":\"1\",\"y\":\"two\"}"}, {"b", "{}"}});  // a's types are unknown: text

  for (const std::string& text : {one, several, loose}) expect_same_streamed(text, kCoder);
  const ChatOutputParsers both = parsers_of(true, ToolCallParser::kQwen3Coder, kCoder.tools);
  v = parse_chat_output("let me see</think>\n\n" + one, true, both);
  EXPECT_EQ(v.reasoning, "let me see");
  EXPECT_EQ(v.content, "\n\n");
  expect_calls(v, {{"get_weather", "{\"city\":\"Zürich\",\"days\":3}"}});
}

TEST(OutputParsersTest, Qwen3CoderMalformedStaysContent) {
  for (const std::string text :
       {"<tool_call>\n{\"name\": \"f\"}\n</tool_call>",                            // hermes' format
        "<tool_call><function=></function></tool_call>",                           // no name
        "<tool_call><function=f</function></tool_call>",                           // no '>'
        "<tool_call><function=f><parameter=p</parameter></function></tool_call>",  // parameter without '>'
        "<tool_call><function=f><parameter=p>1</parameter></function>",            // never closed
        "<function=f><parameter=p>1</parameter></function>",                       // outside a block
        "<tool_call>", "</tool_call>"}) {
    const ChatMessageParts v = parse_chat_output(text, true, kCoder);
    EXPECT_EQ(v.content, text);
    EXPECT_TRUE(v.tool_calls.empty()) << text;
    expect_same_streamed(text, kCoder);
  }
}

// A random text of 1 to 12 pieces that are, or nearly are, the tags and calls the parsers look for.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {"<think>",
                                                  "</think>",
                                                  "<tool_call>",
                                                  "</tool_call>",
                                                  "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
                                                  "{\"name\": \"g\"}",
                                                  "{\"name\": \"h\", \"parameters\": {\"b\": \"}\"}}",
                                                  ";",
                                                  "<|python_tag|>",
                                                  "<function=get_weather>",
                                                  "<parameter=days>",
                                                  "</parameter>",
                                                  "</function>",
                                                  "7",
                                                  "{oops",
                                                  "<",
                                                  "</",
                                                  "<tool",
                                                  "<thi",
                                                  "<|python",
                                                  "hello",
                                                  " ",
                                                  "\n",
                                                  "é",
                                                  "think>",
                                                  "call>"};
  std::string text;
  const int n = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
  return text;
}

std::vector<ChatOutputParsers> all_parsers() {
  std::vector<ChatOutputParsers> out;
  for (bool reasoning : {false, true})
    for (ToolCallParser tools :
         {ToolCallParser::kNone, ToolCallParser::kHermes, ToolCallParser::kLlama3Json, ToolCallParser::kQwen3Coder})
      out.push_back(parsers_of(reasoning, tools, kCoder.tools));
  ChatOutputParsers off = parsers_of(true, ToolCallParser::kHermes);
  off.thinking_disabled = true;
  out.push_back(off);
  return out;
}

// The streaming guarantee: the view of every prefix is a prefix of the final view.
TEST(OutputParsersTest, ViewsArePrefixStable) {
  std::mt19937 rng(5);
  const std::vector<ChatOutputParsers> parsers_list = all_parsers();
  for (int trial = 0; trial < 1500; ++trial) {
    const std::string text = random_text(rng);
    for (const ChatOutputParsers& parsers : parsers_list) {
      const ChatMessageParts full = parse_chat_output(text, true, parsers);
      for (size_t len = 0; len <= text.size(); ++len) {
        const ChatMessageParts part = parse_chat_output(text.substr(0, len), false, parsers);
        ASSERT_EQ(full.reasoning.compare(0, part.reasoning.size(), part.reasoning), 0) << text << " @" << len;
        ASSERT_EQ(full.content.compare(0, part.content.size(), part.content), 0) << text << " @" << len;
        ASSERT_LE(part.tool_calls.size(), full.tool_calls.size()) << text << " @" << len;
        for (size_t k = 0; k < part.tool_calls.size(); ++k) {
          EXPECT_EQ(part.tool_calls[k].name, full.tool_calls[k].name);
          EXPECT_EQ(part.tool_calls[k].arguments, full.tool_calls[k].arguments);
        }
      }
    }
  }
}

// Fed in pieces (any cutting, as the engine's delta reports cut the text), the parser gives pieces
// that concatenate to the message of the whole text: the streamed message is the non-streamed one.
TEST(OutputParsersTest, PiecesAddUpToTheWhole) {
  std::mt19937 rng(7);
  const std::vector<ChatOutputParsers> parsers_list = all_parsers();
  for (int trial = 0; trial < 1500; ++trial) {
    const std::string text = random_text(rng);
    for (const ChatOutputParsers& parsers : parsers_list) {
      const ChatMessageParts whole = parse_chat_output(text, true, parsers);
      ChatOutputParser parser(parsers);
      ChatMessageParts sum;
      size_t at = 0;
      bool done = false;
      while (at < text.size() && !done) {
        const size_t len = std::min(text.size() - at, static_cast<size_t>(rng() % 6));
        const bool last = at + len == text.size() && rng() % 2 == 0;
        ChatMessageParts piece = parser.feed(std::string_view(text).substr(at, len), last);
        sum.reasoning += piece.reasoning;
        sum.content += piece.content;
        for (ToolCall& c : piece.tool_calls) sum.tool_calls.push_back(std::move(c));
        at += len;
        done = last;
      }
      if (!done) {  // the end may come as an empty piece, as a final report with no new text does
        ChatMessageParts piece = parser.feed("", true);
        sum.reasoning += piece.reasoning;
        sum.content += piece.content;
        for (ToolCall& c : piece.tool_calls) sum.tool_calls.push_back(std::move(c));
      }
      ASSERT_EQ(sum.reasoning, whole.reasoning) << text;
      ASSERT_EQ(sum.content, whole.content) << text;
      ASSERT_EQ(sum.tool_calls.size(), whole.tool_calls.size()) << text;
      for (size_t k = 0; k < whole.tool_calls.size(); ++k) {
        EXPECT_EQ(sum.tool_calls[k].name, whole.tool_calls[k].name);
        EXPECT_EQ(sum.tool_calls[k].arguments, whole.tool_calls[k].arguments);
      }
    }
  }
}

}  // namespace
}  // namespace ditto
