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
  bool any() const { return reasoning || tool_calls; }
};

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
