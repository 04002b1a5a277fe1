// Splitting a chat model's generated text into the OpenAI message fields: `reasoning_content`
// (Qwen3 / DeepSeek-R1 `<think>…</think>`, vLLM's --reasoning-parser qwen3) and `tool_calls`
// (Hermes-style `<tool_call>{"name": …, "arguments": …}</tool_call>` blocks, the format Qwen3's
// chat template asks for; vLLM's --tool-call-parser hermes), the rest being `content`.
//
// The split of a text is *prefix-stable*: parsing a prefix of the output (finished = false) gives
// a view whose reasoning and content are prefixes of those of the whole, and whose tool calls are
// a prefix of its tool calls. Streaming sends the differences between successive views, so the
// streamed message always equals the non-streamed one. Text that might still turn into a tag is
// held back until it is decided.
#pragma once

#include <string>
#include <vector>

namespace ditto {

struct ChatOutputParsers {
  bool reasoning = false;   // <think>…</think> at the start → reasoning_content
  bool tool_calls = false;  // <tool_call>…</tool_call> blocks → tool_calls
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

struct ChatOutputView {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
};

// `text` is the generated text so far; `finished` says no more will come (then nothing is held
// back: an unclosed <think> is all reasoning, an unclosed or malformed <tool_call> block is
// content). Never throws on any text.
ChatOutputView parse_chat_output(const std::string& text, bool finished, const ChatOutputParsers& parsers);

}  // namespace ditto
