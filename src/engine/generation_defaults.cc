#include "engine/generation_defaults.h"

#include <filesystem>
#include <sstream>

#include "checkpoint/gguf_model.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/json_input.h"

namespace ditto {

void GenerationDefaults::apply(SamplingParams& p) const {
  if (temperature) p.temperature = *temperature;
  if (top_p) p.top_p = *top_p;
  if (top_k) p.top_k = *top_k;
  if (min_p) p.min_p = *min_p;
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  if (max_new_tokens) p.max_tokens = *max_new_tokens;
}

std::string GenerationDefaults::describe() const {
  std::string out;
  auto add = [&](const char* name, const auto& value) {
    if (!value) return;
    std::ostringstream s;
    s << name << '=' << *value;
    out += (out.empty() ? "" : ", ") + s.str();
  };
  add("temperature", temperature);
  add("top_p", top_p);
  add("top_k", top_k);
  add("min_p", min_p);
  add("repetition_penalty", repetition_penalty);
  add("max_tokens", max_new_tokens);
  return out;
}

GenerationDefaults model_generation_defaults(const std::string& model_path, const std::string& choice) {
  namespace fs = std::filesystem;
  if (choice == "vllm") return {};
  std::string path;
  if (choice == "auto") {
    if (is_gguf_file(model_path)) return {};
    path = (fs::path(model_path) / "generation_config.json").string();
    if (!fs::exists(path)) return {};
  } else {
    path = (fs::path(choice) / "generation_config.json").string();
    if (!fs::is_directory(choice) || !fs::exists(path))
      throw_invalid_argument("generation_config: '" + choice +
                             "' is neither auto, vllm nor a folder holding a generation_config.json");
  }
  const auto j = read_json_file<nlohmann::ordered_json>(path);
  GenerationDefaults d;
  d.source = path;
  auto key = [&](const char* name, auto read) {
    if (!j.contains(name) || j[name].is_null()) return;
    try {
      read(j[name]);
    } catch (const Error& e) {
      throw_invalid_argument(path + ": key '" + name + "': " + e.what());
    }
  };
  key("temperature", [&](const auto& v) { d.temperature = json_float(v, "temperature"); });
  key("top_p", [&](const auto& v) { d.top_p = json_float(v, "top_p"); });
  key("top_k", [&](const auto& v) { d.top_k = json_int(v, "top_k"); });
  key("min_p", [&](const auto& v) { d.min_p = json_float(v, "min_p"); });
  key("repetition_penalty", [&](const auto& v) { d.repetition_penalty = json_float(v, "repetition_penalty"); });
  key("max_new_tokens", [&](const auto& v) { d.max_new_tokens = json_int(v, "max_new_tokens", 1); });
  SamplingParams p;
  d.apply(p);
  try {
    p.validate(/*vocab_size=*/1, /*max_logprobs=*/0);
  } catch (const Error& e) {
    throw_invalid_argument(path + ": " + e.what());
  }
  return d;
}

}  // namespace ditto
