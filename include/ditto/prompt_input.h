// A prompt as the offline API takes it: text, token ids, or chat messages.
// Part of ditto's public C++ API (self-contained: the standard library only). The chat fields are
// JSON text in OpenAI's shapes, so a program needs no particular JSON library to build them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ditto {

// One prompt: exactly one of text, token ids, or chat messages (rendered with the model's chat
// template and chat_template_kwargs such as enable_thinking). Malformed JSON in a chat field is
// refused at the front door with an Error naming the field ("messages", "tools",
// "chat_template_kwargs").
struct PromptInput {
  std::optional<std::string> text = std::nullopt;
  std::optional<std::vector<int32_t>> token_ids = std::nullopt;
  // OpenAI chat messages, a JSON array: [{"role": "user", "content": "Hi"}, ...] (content a string
  // or text parts; assistant tool_calls and "tool" results as OpenAI writes them).
  std::optional<std::string> messages = std::nullopt;
  std::string tools = "";                 // chat: the tool schemas the template lists, a JSON array; "" or "null": none
  std::string chat_template_kwargs = "";  // chat: a JSON object for the template; "": none
  // chat: a Jinja template used instead of the model's (vLLM's per-request chat_template), with
  // the model's special tokens; "": the model's. A syntax error is refused naming "chat_template".
  std::string chat_template = "";
  bool add_generation_prompt = true;    // chat: end with the assistant turn's opening
  bool continue_final_message = false;  // chat: continue the final (assistant) message instead
  // chat: how message content reaches the template (vLLM's --chat-template-content-format):
  // "string" (text parts joined), "openai" (a list of parts, extra fields kept) or "auto" (openai
  // when the template loops over a message's content, else string).
  std::string chat_template_content_format = "auto";
  bool add_special_tokens = true;  // text: the tokenizer's BOS etc. (a rendered chat has its own)
  // chat: the tokenizer's special tokens (BOS) added on top of what the rendered template holds
  // (vLLM's chat add_special_tokens; false, as vLLM's default).
  bool chat_add_special_tokens = false;
};

}  // namespace ditto
