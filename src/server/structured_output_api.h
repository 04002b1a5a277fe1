// The OpenAI API's ways of asking for structured output, translated to the engine's
// StructuredOutputsParams (ditto/sampling_params.h) and back: `response_format` (json_object,
// json_schema, structural_tag) on /v1/completions and /v1/chat/completions, and chat's
// `tool_choice` "required" or a named function, whose output is constrained to tool calls and
// returned as message.tool_calls. vLLM's rules (vllm/entrypoints/openai/protocol.py,
// serving_chat.py); no I/O, no engine.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ditto/request_output.h"
#include "ditto/sampling_params.h"

namespace ditto {

// `response_format` (the field's value): {"type": "text"} → nullopt (no constraint);
// {"type": "json_object"} → json_object; {"type": "json_schema", "json_schema": {"name",
// "schema", "strict", "description"}} → json (the schema; strict true and false both constrain);
// {"type": "structural_tag", ...} → structural_tag (the whole object as JSON text, vLLM's). Throws
// Error(kInvalidArgument) naming the field at fault ("response_format.type",
// "response_format.json_schema.schema", ...): an unknown type, a json_schema without a name or a
// schema (current vLLM refuses one without a schema too: none of its constraints is set).
std::optional<StructuredOutputsParams> read_response_format(const nlohmann::ordered_json& response_format);

// The field an error compiling the response_format's constraint names: where its schema is.
std::string response_format_field(const StructuredOutputsParams& params);

// chat's tool_choice that constrains the output (vLLM's): a named function, or "required".
enum class ForcedToolChoice { kNone, kNamed, kRequired };

// The JSON Schema the output is held to (vLLM's _get_json_schema_from_tool), as JSON text, for the
// request's `tools` (an array of {"type": "function", "function": {"name", "parameters"}}, already
// checked to have names):
//  kNamed: the named function's parameters ({"type": "object", "properties": {}} when it has
//    none). Throws Error(kInvalidArgument, "tool_choice") when no tool has that name.
//  kRequired: a non-empty array of {"name": <one tool's name>, "parameters": <its parameters>}
//    (anyOf over the tools); every tool's "$defs" is lifted to the root so that "#/$defs/…"
//    references still resolve. Throws Error(kInvalidArgument, "tools") for two tools defining one
//    $defs name differently.
// A parameters value that is not an object throws naming "tools".
std::string tool_choice_schema(ForcedToolChoice choice, const nlohmann::ordered_json& tools,
                               const std::string& name = "");

// The tool calls of a kRequired output: the JSON array the schema above admits, each element's
// parameters as the arguments' JSON text (compact, as vLLM's json.dumps writes them; UTF-8 kept).
// nullopt when the text is not such an array (cut by max_tokens, or a constraint that ended in
// error): the caller keeps it as content.
std::optional<std::vector<ToolCall>> parse_required_tool_calls(std::string_view text);

// Called while handling `e`, an error from the front door: when it is about the request's
// constraint (param "structured_outputs…", as the engine names it) and the constraint came from
// another field (`field`, ApiRequest::constraint_field, not ""), rethrows it naming `field`, the
// engine's reason kept; else rethrows `e` as it is.
[[noreturn]] void rethrow_naming_constraint_field(const Error& e, const std::string& field);

}  // namespace ditto
