#include "core/json_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json_input.h"

namespace ditto {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_not_found(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw_not_found(path + ": read failed");
  return s.str();
}

template <typename Json>
Json read_json_file(const std::string& path, bool require_object) {
  const Json j = parse_json_input<Json>(read_text_file(path), path);
  if (require_object && !j.is_object())
    throw_invalid_argument(path + ": expected a JSON object, got " + std::string(j.type_name()));
  return j;
}

std::optional<nlohmann::json> read_json_file_if_present(const std::string& path, bool require_object) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  return read_json_file<nlohmann::json>(path, require_object);
}

template nlohmann::json read_json_file<nlohmann::json>(const std::string&, bool);
template nlohmann::ordered_json read_json_file<nlohmann::ordered_json>(const std::string&, bool);

}  // namespace ditto
