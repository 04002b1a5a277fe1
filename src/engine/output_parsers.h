// Splitting a chat model's generated text into the OpenAI message fields: `reasoning`
// (`<think>…</think>`, vLLM's --reasoning-parser qwen3 / deepseek_r1) and `tool_calls` (vLLM's
// --tool-call-parser hermes, llama3_json or qwen3_coder: tool_call_parsers.h), the rest being
// `content`.
//
// The engine's OutputProcessor runs one ChatOutputParser per choice of a request whose
// EngineRequest::output_parsers are on (the server sets them from its flags) and reports the parts
// in CompletionOutput::message (request_output.h). ChatOutputParser reads the text as it comes (the
// engine's delta reports) and returns what each piece adds to the message. The split does not
// depend on how the text was cut into pieces: feeding any cutting of a text gives pieces that
// concatenate to the result of feeding it whole, which is how a streamed message equals the
// non-streamed one. Text that might still turn into a tag or a call is held back until it is
// decided.
//
// Reasoning, as vLLM's qwen3 and deepseek_r1 parsers read it since vLLM PR #35230: the output
// starts inside the reasoning (the model's own leading <think> is dropped: Qwen3's template leaves
// it to the model, Qwen3-*-Thinking-2507's writes it in the prompt), the reasoning ends at the first
// </think>, and an output without </think> (cut by max_tokens) is all reasoning. qwen3 only: a
// request with chat_template_kwargs {"enable_thinking": false} has no reasoning (its template
// closes an empty think block in the prompt), so its whole output is content.
//
// Tool calls: hermes and qwen3_coder read <tool_call>…</tool_call> blocks anywhere in the content
// (text around them stays content); llama3_json reads the content from <|python_tag|>, or all of
// it when it starts with '{' (leading whitespace aside), to the end of the output, and only then
// decides. A region that is not a well-formed call, or a block still open when the output ends,
// stays content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ditto/request_output.h"
#include "engine/tool_call_parsers.h"

namespace ditto {

struct ChatOutputParsers {
  bool reasoning = false;  // <think>…</think> → reasoning (the rules above)
  // qwen3 with enable_thinking false: the message has a reasoning field (null) but the output is
  // all content. Only read with `reasoning` on.
  bool thinking_disabled = false;
  ToolCallParser tool_call_parser = ToolCallParser::kNone;
  std::string tools;  // the request's tools (JSON array): qwen3_coder converts values by their types
  bool any() const { return reasoning || tool_call_parser != ToolCallParser::kNone; }
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatOutputParsers& parsers);

  // Takes the next piece of generated text; `finished` says no more will come (then nothing is
  // held back: an unclosed <think> is all reasoning, an unclosed or malformed call is content).
  // Returns what the message gains: text to append to reasoning and content, and the tool calls
  // completed. Never throws on any text. Work is linear in the text held back.
  ChatMessageParts feed(std::string_view text, bool finished);

 private:
  enum class State { kStart, kReasoning, kBody };
  // The content part of `rest` for the tool-call parser; returns how many bytes of `rest` were
  // decided (the rest stays pending).
  size_t take_tagged_calls(std::string_view rest, bool finished, ChatMessageParts& out);
  size_t take_llama3_json_calls(std::string_view rest, bool finished, ChatMessageParts& out);

  ChatOutputParsers parsers_;
  ToolParameterTypes parameter_types_;  // qwen3_coder: from parsers_.tools
  State state_ = State::kStart;
  std::string pending_;  // text received and not yet decided
  // llama3_json: whether content has begun (a first non-space byte came), and whether the rest of
  // the output is a call region (held to the end).
  bool content_begun_ = false;
  bool in_call_region_ = false;
};

// The whole message for `text` (one ChatOutputParser fed everything at once).
ChatMessageParts parse_chat_output(std::string_view text, bool finished, const ChatOutputParsers& parsers);

}  // namespace ditto
