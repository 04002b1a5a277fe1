#include "engine/output_parsers.h"

#include <gtest/gtest.h>

#include <random>

namespace ditto {
namespace {

const ChatOutputParsers kBoth{.reasoning = true, .tool_calls = true};

TEST(OutputParsersTest, SplitsReasoningContentAndToolCalls) {
  const std::string text =
      "<think>\nweigh it up\n</think>\n\nLet me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Zürich\"}}\n</tool_call>\n<tool_call>{\"name\": \"now\"}</tool_call>";
  const ChatMessageParts v = parse_chat_output(text, true, kBoth);
  EXPECT_EQ(v.reasoning, "\nweigh it up\n");
  EXPECT_EQ(v.content, "\n\nLet me check.\n");
  ASSERT_EQ(v.tool_calls.size(), 2u);
  EXPECT_EQ(v.tool_calls[0].name, "get_weather");
  EXPECT_EQ(v.tool_calls[0].arguments, "{\"city\":\"Zürich\"}");
  EXPECT_EQ(v.tool_calls[1].name, "now");
  EXPECT_EQ(v.tool_calls[1].arguments, "{}");
}

// vLLM's rules (issue 30): a template that opens <think> in the prompt (Qwen3-*-Thinking-2507) or
// the deepseek_r1 parser starts the output inside the reasoning; otherwise an output that does not
// start with <think> is all content.
TEST(OutputParsersTest, ReasoningStartedInThePrompt) {
  const ChatOutputParsers started{.reasoning = true, .tool_calls = false, .reasoning_started = true};
  const ChatMessageParts v = parse_chat_output("weigh it up\n</think>\n\nParis.", true, started);
  EXPECT_EQ(v.reasoning, "weigh it up\n");
  EXPECT_EQ(v.content, "\n\nParis.");
  EXPECT_EQ(parse_chat_output("<think>again</think>ok", true, started).reasoning, "again");  // a leading tag is dropped
  const ChatMessageParts cut = parse_chat_output("still thinking, cut by max_tokens", true, started);
  EXPECT_EQ(cut.reasoning, "still thinking, cut by max_tokens");  // no </think>: all reasoning
  EXPECT_TRUE(cut.content.empty());
  const ChatOutputParsers plain{.reasoning = true, .tool_calls = false, .reasoning_started = false};
  EXPECT_EQ(parse_chat_output("weigh it up</think>Paris.", true, plain).content, "weigh it up</think>Paris.");
  // Which prompts opened it: the last <think> after the last </think>.
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(prompt_opens_reasoning("<think>a</think>b<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));  // enable_thinking=false
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

TEST(OutputParsersTest, OffMeansEverythingIsContent) {
  const std::string text = "<think>x</think><tool_call>{\"name\": \"f\"}</tool_call>";
  const ChatMessageParts v = parse_chat_output(text, true, {});
  EXPECT_EQ(v.content, text);
  EXPECT_TRUE(v.reasoning.empty());
  EXPECT_TRUE(v.tool_calls.empty());
}

TEST(OutputParsersTest, MalformedOrUnclosedBlocksStayText) {
  EXPECT_EQ(parse_chat_output("a<tool_call>{not json}</tool_call>b", true, kBoth).content,
            "a<tool_call>{not json}</tool_call>b");
  EXPECT_EQ(parse_chat_output("a<tool_call>{\"name\": 5}</tool_call>", true, kBoth).content,
            "a<tool_call>{\"name\": 5}</tool_call>");
  EXPECT_EQ(parse_chat_output("a<tool_call>{\"name\": \"f\"", true, kBoth).content, "a<tool_call>{\"name\": \"f\"");
  EXPECT_EQ(parse_chat_output("<think>still thinking", true, kBoth).reasoning, "still thinking");
  EXPECT_EQ(parse_chat_output("<thi", true, kBoth).content, "<thi");
  // Undecided text is held back while the output may go on.
  EXPECT_EQ(parse_chat_output("<thi", false, kBoth).content, "");
  EXPECT_EQ(parse_chat_output("hello <tool_c", false, kBoth).content, "hello ");
  EXPECT_EQ(parse_chat_output("<think>abc</thi", false, kBoth).reasoning, "abc");
}

// A random text of 1 to 12 pieces that are, or nearly are, the tags and calls the parsers look for.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {"<think>",
                                                  "</think>",
                                                  "<tool_call>",
                                                  "</tool_call>",
                                                  "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
                                                  "{\"name\": \"g\"}",
                                                  "{oops",
                                                  "<",
                                                  "</",
                                                  "<tool",
                                                  "<thi",
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

// The streaming guarantee: the view of every prefix is a prefix of the final view.
TEST(OutputParsersTest, ViewsArePrefixStable) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string text = random_text(rng);
    for (const ChatOutputParsers parsers :
         {kBoth, ChatOutputParsers{.reasoning = true}, ChatOutputParsers{.tool_calls = true}}) {
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
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string text = random_text(rng);
    for (const ChatOutputParsers parsers :
         {kBoth, ChatOutputParsers{.reasoning = true}, ChatOutputParsers{.tool_calls = true}, ChatOutputParsers{},
          ChatOutputParsers{.reasoning = true, .tool_calls = true, .reasoning_started = true}}) {
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
