// The tool-call formats of vLLM's --tool-call-parser: how the text of one call region becomes
// OpenAI tool calls. Where a region starts and ends in a streamed output is ChatOutputParser's
// business (output_parsers.h); these functions only read a region already cut out, and return
// nullopt for text that is not a well-formed call (the caller then keeps it as content). None of
// them throws on any text.
//
//   hermes       <tool_call>{"name": "f", "arguments": {...}}</tool_call>  (Qwen2.5 / Qwen3)
//   llama3_json  [<|python_tag|>]{"name": "f", "parameters": {...}}; {...}  (Llama 3.x)
//   qwen3_coder  <tool_call><function=f><parameter=p>value</parameter></function></tool_call>
//                (Qwen3-Coder; each value is converted by the tool's JSON-schema type)
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ditto/request_output.h"

namespace ditto {

enum class ToolCallParser { kNone, kHermes, kLlama3Json, kQwen3Coder };

// The parser vLLM's --tool-call-parser NAME selects: "hermes", "llama3_json" or "qwen3_coder";
// nullopt for any other name.
std::optional<ToolCallParser> tool_call_parser_named(std::string_view name);

// The names tool_call_parser_named accepts, for error messages: "hermes, llama3_json or qwen3_coder".
const char* tool_call_parser_names();

// function name → parameter name → the JSON-schema "type" of that parameter (lower-cased; of a
// type list such as ["integer", "null"], its first entry other than "null"). Read from a request's
// `tools` (a JSON array of {"type": "function", "function": {"name", "parameters"}}); a parameter
// without a type, or a tools text that is not such an array, is simply absent.
using ToolParameterTypes = std::map<std::string, std::map<std::string, std::string>>;
ToolParameterTypes tool_parameter_types(std::string_view tools_json);

// hermes: the body of one <tool_call> block, a JSON object with a string "name" and "arguments"
// either an object (its JSON text is taken) or a string (taken as the JSON text); no
// "arguments" gives "{}".
std::optional<ToolCall> parse_hermes_call(std::string_view body);

// llama3_json: `text` is everything after <|python_tag|> (or the whole output that starts with
// "{"): one or more JSON objects separated by ';' (whitespace around them, and one ';' at the end,
// allowed), each with a string "name" and "arguments" or, when that is absent, "parameters" (any
// JSON value; its compact JSON text becomes the call's arguments). Anything else, anywhere in
// `text`, makes the whole of it not a call list.
std::optional<std::vector<ToolCall>> parse_llama3_json_calls(std::string_view text);

// qwen3_coder: the body of one <tool_call> block, holding one or more
// <function=NAME>…</function> (the last may be closed by the block's end instead). Inside a
// function, each <parameter=P>value ends at </parameter>, at the next <parameter=, or at the end
// of the function; one newline is dropped from each end of the value. A value is converted by
// `types[NAME][P]` as vLLM's qwen3_coder does: "null" (any case) → null; string-like or no type →
// the text; int… / uint… / long… / short… / unsigned… → an integer; num… / float… → a number
// (an integer when whole); boolean / bool / binary → whether it reads "true" (any case);
// any other type → the value read as JSON. A value that does not read as its type stays text.
// nullopt for a body without a function, or a function or parameter tag without its '>'.
std::optional<std::vector<ToolCall>> parse_qwen3_coder_calls(std::string_view body, const ToolParameterTypes& types);

}  // namespace ditto
