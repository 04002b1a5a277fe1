#include "engine/chat_messages.h"

#include <set>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/json_input.h"

namespace ditto {

using Json = nlohmann::ordered_json;

Json normalize_chat_messages(const Json& messages, ChatContentFormat format) {
  if (!messages.is_array() || messages.empty())
    throw_invalid_field("messages", "field 'messages' must be a non-empty array of messages");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    Json m = messages[i];
    const std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw_invalid_field("messages", "field '" + name + "' must be an object");
    // Any role the template knows what to do with (vLLM's custom roles): a non-empty string.
    if (!m.contains("role") || !m["role"].is_string() || m["role"].get<std::string>().empty())
      throw_invalid_field("messages", "field '" + name + ".role' must be a non-empty string");
    // content: a string, null (→ ""), or text parts (joined with newlines, as vLLM does for
    // text-only models).
    const bool parts = format == ChatContentFormat::kOpenAi;
    if (!m.contains("content") || m["content"].is_null()) {
      m["content"] = parts ? Json::array() : Json("");
    } else if (parts && m["content"].is_string()) {
      m["content"] = Json::array({Json{{"type", "text"}, {"text", m["content"]}}});
    } else if (m["content"].is_array()) {
      std::string text;
      for (size_t k = 0; k < m["content"].size(); ++k) {
        const Json& part = m["content"][k];
        const std::string where = name + ".content[" + std::to_string(k) + "]";
        // vLLM's text-like parts: text, input_text and output_text carry "text", refusal "refusal".
        const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                     ? part["type"].get<std::string>()
                                     : "";
        const char* key = type == "refusal" ? "refusal" : "text";
        if (!(type == "text" || type == "input_text" || type == "output_text" || type == "refusal") ||
            !part.contains(key) || !part[key].is_string())
          throw_invalid_field("messages", "field '" + where +
                                              "' must be {\"type\": \"text\", \"text\": ...} (or input_text, "
                                              "output_text, refusal): this model takes text only, got " +
                                              json_excerpt(part));
        if (k > 0) text += '\n';
        text += part[key].get<std::string>();
      }
      if (!parts) m["content"] = text;  // kOpenAi: the parts as sent
    } else if (!m["content"].is_string()) {
      throw_invalid_field("messages", "field '" + name +
                                          ".content' must be a string, an array of text parts or null, got " +
                                          json_excerpt(m["content"]));
    }
    // tool_calls: OpenAI's {id, type, function: {name, arguments: JSON text}}; the arguments go to
    // the template as an object when they parse (Hugging Face templates expect a mapping).
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array())
        throw_invalid_field("messages", "field '" + name + ".tool_calls' must be an array");
      for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
        Json& call = m["tool_calls"][k];
        const std::string where = name + ".tool_calls[" + std::to_string(k) + "]";
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
            !call["function"].contains("name") || !call["function"]["name"].is_string())
          throw_invalid_field("messages", "field '" + where +
                                              "' must be {\"type\": \"function\", \"function\": "
                                              "{\"name\": ..., \"arguments\": ...}}, got " +
                                              json_excerpt(call));
        Json& args = call["function"]["arguments"];
        if (args.is_null()) args = Json::object();
        if (args.is_string()) {
          Json parsed = Json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
          if (parsed.is_object()) args = std::move(parsed);
        }
      }
    } else {
      m.erase("tool_calls");
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace ditto
