// Splitting a chat model's generated text into the OpenAI message fields: `reasoning_content`
// (Qwen3 / DeepSeek-R1 `<think>…</think>`, vLLM's --reasoning-parser qwen3) and `tool_calls`
// (Hermes-style `<tool_call>{"name": …, "arguments": …}</tool_call>` blocks, the format Qwen3's
// chat template asks for; vLLM's --tool-call-parser hermes), the rest being `content`.
//
// The engine's OutputProcessor runs one ChatOutputParser per choice of a request whose
// EngineRequest::output_parsers are on (the server sets them from its flags) and reports the parts
// in CompletionOutput::message (request_output.h). ChatOutputParser reads the text as it comes (the engine's delta
// reports) and returns what each piece adds to the message. The split does not depend on how the text was cut into
// pieces: feeding any cutting of a text gives pieces that concatenate to the result of feeding it whole, which is how a
// streamed message equals the non-streamed one. Text that might still turn into a tag is held back until it is decided.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ditto/request_output.h"

namespace ditto {

struct ChatOutputParsers {
  bool reasoning = false;   // <think>…</think> at the start → reasoning_content
  bool tool_calls = false;  // <tool_call>…</tool_call> blocks → tool_calls
  // The output starts inside the reasoning (with reasoning on): the prompt opened <think> (a
  // template that thinks in its generation prompt, e.g. Qwen3-*-Thinking-2507), or vLLM's
  // deepseek_r1 parser, which takes an output without </think> as all reasoning. Then everything
  // up to </think> is reasoning (a leading <think> the model writes anyway is dropped). Without
  // it, only an output that starts with <think> has reasoning, and one that does not is content.
  bool reasoning_started = false;
  bool any() const { return reasoning || tool_calls; }
};

// Whether `prompt` (a rendered chat) ends inside a reasoning block: its last <think> comes after
// its last </think> (Qwen3-*-Thinking-2507 and DeepSeek-R1-0528 templates open it in the
// generation prompt; Qwen3's enable_thinking=false closes an empty one).
bool prompt_opens_reasoning(std::string_view prompt);

class ChatOutputParser {
 public:
  explicit ChatOutputParser(ChatOutputParsers parsers) : parsers_(parsers) {}

  // Takes the next piece of generated text; `finished` says no more will come (then nothing is
  // held back: an unclosed <think> is all reasoning, an unclosed or malformed <tool_call> block is
  // content). Returns what the message gains: text to append to reasoning and content, and the
  // tool calls completed. Never throws on any text. Work is linear in the text held back.
  ChatMessageParts feed(std::string_view text, bool finished);

 private:
  enum class State { kStart, kReasoning, kBody };
  ChatOutputParsers parsers_;
  State state_ = State::kStart;
  std::string pending_;  // text received and not yet decided
};

// The whole message for `text` (one ChatOutputParser fed everything at once).
ChatMessageParts parse_chat_output(std::string_view text, bool finished, const ChatOutputParsers& parsers);

}  // namespace ditto
