#include "server/structured_output_api.h"

#include "core/json_input.h"

namespace ditto {

namespace {

using Json = nlohmann::ordered_json;

bool present(const Json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// Python's json.dumps(value, ensure_ascii=False) (", " and ": " between items), as vLLM writes a
// required tool call's arguments. `value` came from parse_json_input (depth ≤ kMaxJsonDepth).
void dump_python_style(const Json& value, std::string& out) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += ", ";
      first = false;
      out += Json(key).dump();
      out += ": ";
      dump_python_style(item, out);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    for (size_t i = 0; i < value.size(); ++i) {
      if (i) out += ", ";
      dump_python_style(value[i], out);
    }
    out += ']';
  } else {
    out += value.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
  }
}

// A tool's parameters schema: {"type": "object", "properties": {}} when absent (vLLM's, for
// "required"; OpenAI's "a function with an empty parameter list").
Json tool_parameters(const Json& tools, size_t i) {
  const Json& function = tools[i]["function"];
  if (!present(function, "parameters")) return Json{{"type", "object"}, {"properties", Json::object()}};
  const Json& p = function["parameters"];
  if (!p.is_object())
    throw_invalid_field("tools", "field 'tools[" + std::to_string(i) +
                                     "].function.parameters' must be a JSON Schema object, got " + json_excerpt(p));
  return p;
}

}  // namespace

std::optional<StructuredOutputsParams> read_response_format(const Json& rf) {
  if (!rf.is_object() || !rf.contains("type"))
    throw_invalid_field("response_format",
                        "field 'response_format' must be an object with a \"type\" (text, json_object, json_schema "
                        "or structural_tag), got " +
                            json_excerpt(rf));
  const Json& type = rf["type"];
  StructuredOutputsParams so;
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    so.json_object = true;
  } else if (type == "json_schema") {
    const std::string f = "response_format.json_schema";
    if (!present(rf, "json_schema"))
      throw_invalid_field(f,
                          "response_format of type json_schema needs field 'json_schema' ({\"name\": ..., "
                          "\"schema\": {...}})");
    const Json& js = rf["json_schema"];
    if (!js.is_object()) throw_invalid_field(f, "field '" + f + "' must be an object, got " + json_excerpt(js));
    if (!present(js, "name") || !js["name"].is_string())
      throw_invalid_field(f + ".name", "field '" + f + ".name' must be a string (the format's name)");
    if (present(js, "strict") && !js["strict"].is_boolean())
      throw_invalid_field(f + ".strict",
                          "field '" + f + ".strict' must be true or false, got " + json_excerpt(js["strict"]));
    if (present(js, "description") && !js["description"].is_string())
      throw_invalid_field(f + ".description", "field '" + f + ".description' must be a string");
    // strict true or false: the output is held to the schema either way (the grammar engine
    // enforces every keyword it supports and refuses the schema if it cannot).
    if (!present(js, "schema"))
      throw_invalid_field(f + ".schema", "field '" + f +
                                             ".schema' is required: the JSON Schema the output must match (for any "
                                             "JSON object, use response_format {\"type\": \"json_object\"})");
    const Json& schema = js["schema"];
    if (!schema.is_object() && !schema.is_boolean())
      throw_invalid_field(f + ".schema",
                          "field '" + f + ".schema' must be a JSON Schema (an object), got " + json_excerpt(schema));
    so.json = schema.dump();
  } else if (type == "structural_tag") {
    so.structural_tag = rf.dump();  // vLLM passes the whole object on
  } else {
    throw_invalid_field("response_format.type",
                        "field 'response_format.type' must be \"text\", \"json_object\", \"json_schema\" or "
                        "\"structural_tag\", got " +
                            json_excerpt(type));
  }
  return so;
}

std::string response_format_field(const StructuredOutputsParams& params) {
  if (params.json) return "response_format.json_schema.schema";
  return "response_format";
}

std::string tool_choice_schema(ForcedToolChoice choice, const Json& tools, const std::string& name) {
  DITTO_CHECK(choice != ForcedToolChoice::kNone && tools.is_array()) << "no tool choice to constrain to";
  if (choice == ForcedToolChoice::kNamed) {
    for (size_t i = 0; i < tools.size(); ++i)
      if (tools[i]["function"]["name"] == name) return tool_parameters(tools, i).dump();
    throw_invalid_field("tool_choice",
                        "tool_choice names function \"" + name + "\", which is not among the request's tools");
  }
  Json any_of = Json::array();
  Json defs = Json::object();
  for (size_t i = 0; i < tools.size(); ++i) {
    Json parameters = tool_parameters(tools, i);
    if (parameters.contains("$defs")) {
      if (!parameters["$defs"].is_object())
        throw_invalid_field("tools", "field 'tools[" + std::to_string(i) +
                                         "].function.parameters.$defs' must be "
                                         "an object");
      for (const auto& [def, schema] : parameters["$defs"].items()) {
        if (defs.contains(def) && defs[def] != schema)
          throw_invalid_field("tools", "tools define \"$defs\" entry \"" + def +
                                           "\" differently; with tool_choice \"required\" their definitions share "
                                           "one namespace");
        defs[def] = schema;
      }
      parameters.erase("$defs");
    }
    any_of.push_back({{"properties",
                       {{"name", {{"type", "string"}, {"enum", Json::array({tools[i]["function"]["name"]})}}},
                        {"parameters", std::move(parameters)}}},
                      {"required", Json::array({"name", "parameters"})}});
  }
  Json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"type", "object"}, {"anyOf", std::move(any_of)}}}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return schema.dump();
}

std::optional<std::vector<ToolCall>> parse_required_tool_calls(std::string_view text) {
  Json calls;
  try {
    calls = parse_json_input<Json>(text, "tool calls");
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!calls.is_array()) return std::nullopt;
  std::vector<ToolCall> out;
  for (const Json& c : calls) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("parameters"))
      return std::nullopt;
    ToolCall call;
    call.name = c["name"].get<std::string>();
    dump_python_style(c["parameters"], call.arguments);
    out.push_back(std::move(call));
  }
  return out;
}

void rethrow_naming_constraint_field(const Error& e, const std::string& field) {
  const std::string& param = e.param();
  if (field.empty() || param.rfind("structured_outputs", 0) != 0) throw;
  std::string why = e.what();
  if (why.rfind(param + ": ", 0) == 0) why.erase(0, param.size() + 2);  // the engine's "<param>: " prefix
  throw Error(e.code(), field + ": " + why, field);
}

}  // namespace ditto
