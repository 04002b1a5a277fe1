#include "checkpoint/generation_config.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"

namespace ditto {

std::vector<int64_t> eos_token_ids(const std::string& model_dir, const ModelConfig& config) {
  const std::string path = model_dir + "/generation_config.json";
  if (!std::filesystem::exists(path)) return config.eos_token_ids;
  const nlohmann::json j = read_json_file(path);
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return config.eos_token_ids;
  const nlohmann::json& e = j["eos_token_id"];
  std::vector<int64_t> ids;
  if (e.is_number_integer()) {
    ids.push_back(e.get<int64_t>());
  } else if (e.is_array()) {
    for (const auto& v : e) {
      if (!v.is_number_integer())
        throw_invalid_argument(path + ": key 'eos_token_id': expected integers, got " + v.dump());
      ids.push_back(v.get<int64_t>());
    }
  } else {
    throw_invalid_argument(path + ": key 'eos_token_id': expected an integer or a list, got " + e.dump());
  }
  return ids;
}

}  // namespace ditto
