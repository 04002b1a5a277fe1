// Chat templates on arbitrary bytes: the input is a template's source, given as a
// tokenizer_config.json's "chat_template" would give it; the Jinja lexer, parser and interpreter
// then render a conversation with every message kind (system, user with content parts, assistant
// with reasoning and tool calls, tool result), tools, and the kwargs templates read. The
// interpreter's limits (output size, depth, steps, range) must stop anything that would not end.
// Any input must render or throw ditto::Error (jinja::TemplateError is one).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace {

using Json = nlohmann::ordered_json;

const Json& messages() {
  static const Json m = Json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
    {"role": "assistant", "content": "", "reasoning_content": "add them",
     "tool_calls": [{"type": "function", "id": "c1", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
    {"role": "tool", "content": "4", "tool_call_id": "c1"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "ünïcødé 🙂 and {{ braces }}"}
  ])");
  return m;
}

const Json& tools() {
  static const Json t = Json::parse(R"([{"type": "function", "function": {"name": "add", "description": "a+b",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}])");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Json config = {{"bos_token", "<|im_start|>"}, {"eos_token", "<|im_end|>"}};
  config["chat_template"] = std::string(reinterpret_cast<const char*>(data), size);
  try {
    const ditto::ChatTemplate t = ditto::ChatTemplate::from_config(config, "fuzz tokenizer_config.json");
    (void)t.render(messages(), tools(), /*add_generation_prompt=*/true, {{"enable_thinking", false}});
    (void)t.render(Json::array({messages()[1]}), nullptr, /*add_generation_prompt=*/false);
  } catch (const ditto::Error&) {
  } catch (const nlohmann::json::exception&) {
    // from_config takes any string; a JSON exception here would mean ditto let one escape.
    std::abort();
  }
  return 0;
}
