#include "engine/tool_call_parsers.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

// Compact JSON text, invalid UTF-8 replaced rather than thrown on.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::optional<Json> read_json(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The end (one past its '}') of the JSON object that starts at s[0] == '{', braces inside strings
// skipped; npos when it does not close within `s`.
size_t object_end(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// A qwen3_coder parameter value as its schema type says (the rules in the header).
Json convert_parameter(const std::string& value, const std::string& type) {
  if (lower(value) == "null") return nullptr;
  auto is = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), type) != names.end();
  };
  auto starts = [&](std::initializer_list<std::string_view> prefixes) {
    return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return type.starts_with(p); });
  };
  if (type.empty() || is({"string", "str", "text", "varchar", "char", "enum"})) return value;
  if (starts({"int", "uint", "long", "short", "unsigned"})) {
    std::string_view s = trim(value);
    if (s.starts_with('+')) s.remove_prefix(1);
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return n;
    return value;
  }
  if (starts({"num", "float"})) {
    std::string_view s = trim(value);
    if (s.starts_with('+')) s.remove_prefix(1);
    double x = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty() || !std::isfinite(x)) return value;
    // A whole number is an integer (vLLM's int(x) when x has no fraction), within int64's range.
    if (x == std::trunc(x) && std::fabs(x) < 9.2e18) return static_cast<int64_t>(x);
    return x;
  }
  if (is({"boolean", "bool", "binary"})) return lower(value) == "true";
  // object, array and any other type: the value as JSON (vLLM reads it with json.loads, then
  // Python's literal syntax; ditto reads JSON only).
  if (std::optional<Json> j = read_json(value)) return *j;
  return value;
}

}  // namespace

std::optional<ToolCallParser> tool_call_parser_named(std::string_view name) {
  if (name == "hermes") return ToolCallParser::kHermes;
  if (name == "llama3_json") return ToolCallParser::kLlama3Json;
  if (name == "qwen3_coder") return ToolCallParser::kQwen3Coder;
  return std::nullopt;
}

const char* tool_call_parser_names() { return "hermes, llama3_json or qwen3_coder"; }

ToolParameterTypes tool_parameter_types(std::string_view tools_json) {
  ToolParameterTypes out;
  const std::optional<Json> tools = read_json(tools_json);
  if (!tools || !tools->is_array()) return out;
  for (const Json& tool : *tools) {
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) continue;
    const Json& f = tool["function"];
    if (!f.contains("name") || !f["name"].is_string() || !f.contains("parameters") || !f["parameters"].is_object())
      continue;
    // vLLM reads "properties" when the schema has it, else the schema object itself.
    const Json& params = f["parameters"];
    const Json& props =
        params.contains("properties") && params["properties"].is_object() ? params["properties"] : params;
    auto& types = out[f["name"].get<std::string>()];
    for (const auto& [param, schema] : props.items()) {
      if (!schema.is_object() || !schema.contains("type")) continue;
      const Json& t = schema["type"];
      if (t.is_string()) {
        types[param] = lower(trim(t.get<std::string>()));
      } else if (t.is_array()) {
        for (const Json& e : t)
          if (e.is_string() && lower(e.get<std::string>()) != "null") {
            types[param] = lower(trim(e.get<std::string>()));
            break;
          }
      }
    }
  }
  return out;
}

std::optional<ToolCall> parse_hermes_call(std::string_view body) {
  const std::optional<Json> j = read_json(body);
  if (!j || !j->is_object() || !j->contains("name") || !(*j)["name"].is_string()) return std::nullopt;
  ToolCall call;
  call.name = (*j)["name"].get<std::string>();
  const Json args = j->contains("arguments") ? (*j)["arguments"] : Json::object();
  if (args.is_string())
    call.arguments = args.get<std::string>();
  else if (args.is_object())
    call.arguments = dump(args);
  else
    return std::nullopt;
  return call;
}

std::optional<std::vector<ToolCall>> parse_llama3_json_calls(std::string_view text) {
  std::vector<ToolCall> calls;
  std::string_view rest = trim(text);
  while (!rest.empty()) {
    if (rest.front() != '{') return std::nullopt;
    const size_t end = object_end(rest);
    if (end == std::string_view::npos) return std::nullopt;
    const std::optional<Json> j = read_json(rest.substr(0, end));
    if (!j || !j->is_object() || !j->contains("name") || !(*j)["name"].is_string()) return std::nullopt;
    const char* key = j->contains("arguments") ? "arguments" : "parameters";
    if (!j->contains(key)) return std::nullopt;
    ToolCall call;
    call.name = (*j)["name"].get<std::string>();
    call.arguments = dump((*j)[key]);
    calls.push_back(std::move(call));
    rest = trim(rest.substr(end));
    if (rest.starts_with(';')) rest = trim(rest.substr(1));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::optional<std::vector<ToolCall>> parse_qwen3_coder_calls(std::string_view body, const ToolParameterTypes& types) {
  constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>";
  constexpr std::string_view kParameter = "<parameter=", kParameterEnd = "</parameter>";
  static const std::map<std::string, std::string> kNoTypes;
  std::vector<ToolCall> calls;
  for (size_t at = body.find(kFunction); at != std::string_view::npos; at = body.find(kFunction, at)) {
    at += kFunction.size();
    const size_t close = body.find(kFunctionEnd, at);
    const std::string_view function = body.substr(at, close == std::string_view::npos ? body.npos : close - at);
    at = close == std::string_view::npos ? body.size() : close + kFunctionEnd.size();
    const size_t name_end = function.find('>');
    if (name_end == std::string_view::npos || name_end == 0) return std::nullopt;
    ToolCall call;
    call.name = std::string(function.substr(0, name_end));
    const auto found = types.find(call.name);
    const std::map<std::string, std::string>& param_types = found == types.end() ? kNoTypes : found->second;
    Json args = Json::object();
    std::string_view params = function.substr(name_end + 1);
    for (size_t p = params.find(kParameter); p != std::string_view::npos; p = params.find(kParameter, p)) {
      p += kParameter.size();
      const size_t end = std::min(params.find(kParameterEnd, p), params.find(kParameter, p));
      const std::string_view param = params.substr(p, end == std::string_view::npos ? params.npos : end - p);
      const size_t gt = param.find('>');
      if (gt == std::string_view::npos) return std::nullopt;
      std::string_view value = param.substr(gt + 1);
      if (value.starts_with('\n')) value.remove_prefix(1);
      if (value.ends_with('\n')) value.remove_suffix(1);
      const std::string name(param.substr(0, gt));
      const auto type = param_types.find(name);
      args[name] = convert_parameter(std::string(value), type == param_types.end() ? "" : type->second);
      p = end;
    }
    call.arguments = dump(args);
    calls.push_back(std::move(call));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace ditto
