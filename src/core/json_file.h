// Reading files from disk: the one place ditto opens a text or JSON file (config.json,
// tokenizer.json, tokenizer_config.json, generation_config.json, safetensors indexes, prompt
// files), so every reader reports a missing file and a malformed document the same way.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ditto {

// The whole file as bytes. Throws Error(kNotFound) "PATH: cannot open" when it cannot be read.
std::string read_text_file(const std::string& path);

// The file parsed as JSON (nlohmann::json or nlohmann::ordered_json, whose key order a chat
// template may depend on). Throws Error(kNotFound) as read_text_file, and Error(kInvalidArgument)
// "PATH: not valid JSON (byte N): ..." for a malformed document, or "PATH: expected a JSON
// object, got TYPE" when `require_object` is set and the top level is something else.
template <typename Json = nlohmann::json>
Json read_json_file(const std::string& path, bool require_object = true);

// As read_json_file<nlohmann::json>, or nullopt when no file exists at `path` (an optional file such
// as generation_config.json).
std::optional<nlohmann::json> read_json_file_if_present(const std::string& path, bool require_object = true);

extern template nlohmann::json read_json_file<nlohmann::json>(const std::string&, bool);
extern template nlohmann::ordered_json read_json_file<nlohmann::ordered_json>(const std::string&, bool);

}  // namespace ditto
