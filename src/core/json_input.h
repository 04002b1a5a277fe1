// Parsing JSON that comes from others: request bodies, command-line flags, JSON-lines input, and the
// JSON files of a model (config.json, tokenizer.json, safetensors headers).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_fields.h"  // json_excerpt and the strict field readers (json_int, ...)

namespace ditto {

// Deeper documents are refused while parsing: serialising or converting them later recurses
// once per level, and 100,000 levels overflow the stack.
inline constexpr int kMaxJsonDepth = 512;

// Parses `text` as Json (nlohmann::json or nlohmann::ordered_json). Throws Error(kInvalidArgument)
// starting with `where` for invalid JSON (with the byte offset), a number out of range, or nesting
// deeper than kMaxJsonDepth (naming, as the error's param, the top-level object's field that is
// too deep: a request body's field). Every JSON written by others (request bodies, config.json,
// tokenizer.json, safetensors headers) is parsed here, so none can throw another exception.
template <typename Json>
Json parse_json_input(std::string_view text, const std::string& where) {
  try {
    std::string field;  // the top-level object's key being read
    return Json::parse(text.begin(), text.end(), [&](int depth, nlohmann::json::parse_event_t event, Json& parsed) {
      if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string())
        field = parsed.template get<std::string>();
      if (depth > kMaxJsonDepth) {
        const std::string why = "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
        if (field.empty()) throw_invalid_argument(where + ": " + why);
        throw_invalid_field(field, where + ": field '" + field + "' is " + why);
      }
      return true;
    });
  } catch (const nlohmann::json::parse_error& e) {
    throw_invalid_argument(where + ": invalid JSON (byte " + std::to_string(e.byte) + "): " + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double (1e400)
    throw_invalid_argument(where + ": invalid JSON: " + e.what());
  }
}

}  // namespace ditto
