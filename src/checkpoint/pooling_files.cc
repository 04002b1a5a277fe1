#include "checkpoint/pooling_files.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/gguf_reader.h"
#include "core/error.h"
#include "core/json_file.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPoolingModule = "sentence_transformers.models.Pooling";
constexpr const char* kNormalizeModule = "sentence_transformers.models.Normalize";
constexpr const char* kTransformerModule = "sentence_transformers.models.Transformer";

// A Pooling config's mode keys (sentence_transformers/models/Pooling.py, get_config_dict), in its
// order; `type` is empty for the modes ditto does not pool by.
struct PoolingMode {
  const char* key;
  std::optional<PoolingType> type;
};
constexpr PoolingMode kPoolingModes[] = {
    {"pooling_mode_cls_token", PoolingType::kCls},      {"pooling_mode_mean_tokens", PoolingType::kMean},
    {"pooling_mode_max_tokens", std::nullopt},          {"pooling_mode_mean_sqrt_len_tokens", std::nullopt},
    {"pooling_mode_weightedmean_tokens", std::nullopt}, {"pooling_mode_lasttoken", PoolingType::kLast},
};
constexpr const char* kSupportedModes = "pooling_mode_lasttoken, pooling_mode_mean_tokens or pooling_mode_cls_token";

// llama.cpp's enum llama_pooling_type (gguf-py PoolingType): NONE 0, MEAN 1, CLS 2, LAST 3, RANK 4.
constexpr int64_t kGgufNone = 0, kGgufMean = 1, kGgufCls = 2, kGgufLast = 3, kGgufRank = 4;

// Which modes a Pooling config turns on: true boolean keys; absent or null keys are off.
std::vector<const PoolingMode*> modes_on(const json& config, const std::string& path) {
  std::vector<const PoolingMode*> on;
  for (const PoolingMode& mode : kPoolingModes) {
    const auto it = config.find(mode.key);
    if (it == config.end() || it->is_null()) continue;
    if (!it->is_boolean()) {
      throw_invalid_argument(path + ": key '" + mode.key + "' is " + it->dump() + ", expected true or false");
    }
    if (it->get<bool>()) on.push_back(&mode);
  }
  return on;
}

// The Pooling module's config.json: one mode ditto pools by.
PoolingType read_pooling_config(const std::string& path) {
  const json config = read_json_file(path);
  const std::vector<const PoolingMode*> on = modes_on(config, path);
  if (on.empty()) {
    throw_invalid_argument(path + ": no pooling mode is true (ditto pools by " + kSupportedModes + ")");
  }
  if (on.size() > 1) {
    std::string names;
    for (const PoolingMode* mode : on) names += (names.empty() ? "" : ", ") + std::string(mode->key);
    throw_invalid_argument(path + ": several pooling modes are true (" + names +
                           "); sentence-transformers concatenates them, ditto pools one way");
  }
  if (!on[0]->type) {
    throw_invalid_argument(path + ": key '" + on[0]->key + "' is true; ditto pools by " + kSupportedModes);
  }
  // include_prompt = false leaves an instruction prompt's tokens out of a mean; ditto's mean takes
  // every prompt token, so it refuses rather than differ (last-token and CLS pooling are alike).
  const auto include_prompt = config.find("include_prompt");
  if (include_prompt != config.end() && !include_prompt->is_null()) {
    if (!include_prompt->is_boolean()) {
      throw_invalid_argument(path + ": key 'include_prompt' is " + include_prompt->dump() + ", expected true or false");
    }
    if (!include_prompt->get<bool>() && *on[0]->type == PoolingType::kMean) {
      throw_invalid_argument(path +
                             ": key 'include_prompt' is false with pooling_mode_mean_tokens; ditto's mean "
                             "takes every prompt token");
    }
  }
  return *on[0]->type;
}

// modules.json: the Pooling module's config and whether a Normalize module follows. nullopt
// without a Pooling module.
std::optional<PoolingFiles> read_sentence_transformers(const std::string& dir) {
  const std::string path = (fs::path(dir) / "modules.json").string();
  if (!fs::exists(path)) return std::nullopt;
  const json modules = read_json_file(path, /*require_object=*/false);
  if (!modules.is_array()) {
    throw_invalid_argument(path + ": expected a list of modules, got " + std::string(modules.type_name()));
  }
  std::optional<std::string> pooling_path;
  bool normalize = false;
  for (size_t i = 0; i < modules.size(); ++i) {
    const json& m = modules[i];
    const std::string at = path + ": module [" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) {
      throw_invalid_argument(at + " has no string 'type'");
    }
    const std::string type = m["type"].get<std::string>();
    if (type == kPoolingModule) {
      if (pooling_path) throw_invalid_argument(at + ": a second Pooling module");
      if (!m.contains("path") || !m["path"].is_string()) throw_invalid_argument(at + " (Pooling) has no string 'path'");
      pooling_path = m["path"].get<std::string>();
    } else if (type == kNormalizeModule) {
      normalize = true;
    } else if (type != kTransformerModule) {
      // A Dense projection or any other module would change the vector: refused, never skipped.
      throw_invalid_argument(at + " is '" + type + "'; ditto applies only " + kTransformerModule + ", " +
                             kPoolingModule + " and " + kNormalizeModule);
    }
  }
  if (!pooling_path) return std::nullopt;
  PoolingFiles files;
  files.pooling_type = read_pooling_config((fs::path(dir) / *pooling_path / "config.json").string());
  files.normalize = normalize;
  files.source = path;
  return files;
}

std::optional<PoolingFiles> read_gguf_pooling_type(const std::string& path) {
  const auto gguf = GgufFile::open(path, /*metadata_only=*/true);
  const std::optional<std::string> arch = gguf->get_string("general.architecture");
  if (!arch) return std::nullopt;
  const std::string key = *arch + ".pooling_type";
  const std::optional<int64_t> value = gguf->get_int(key);
  if (!value || *value == kGgufNone) return std::nullopt;
  PoolingFiles files;
  files.source = path + ": " + key;
  switch (*value) {
    case kGgufMean: files.pooling_type = PoolingType::kMean; break;
    case kGgufCls: files.pooling_type = PoolingType::kCls; break;
    case kGgufLast: files.pooling_type = PoolingType::kLast; break;
    case kGgufRank: files.rank = true; break;
    default:
      throw_invalid_argument(path + ": metadata '" + key + "' is " + std::to_string(*value) +
                             "; llama.cpp's pooling types are 0 NONE, 1 MEAN, 2 CLS, 3 LAST, 4 RANK");
  }
  return files;
}

}  // namespace

const char* pooling_type_name(PoolingType type) {
  switch (type) {
    case PoolingType::kLast: return "LAST";
    case PoolingType::kMean: return "MEAN";
    case PoolingType::kCls: return "CLS";
  }
  return "?";
}

PoolingType parse_pooling_type(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (PoolingType type : {PoolingType::kLast, PoolingType::kMean, PoolingType::kCls}) {
    if (upper == pooling_type_name(type)) return type;
  }
  throw_invalid_field("pooling_type", "pooling_type '" + name + "' is not one of LAST, MEAN, CLS");
}

std::optional<PoolingFiles> read_pooling_files(const std::string& model_path) {
  if (is_gguf_file(model_path)) return read_gguf_pooling_type(model_path);
  if (fs::is_directory(model_path)) return read_sentence_transformers(model_path);
  return std::nullopt;
}

}  // namespace ditto
