// A tiny model directory for engine and forward-pass tests: real tensor names and layout, small
// sizes (vocab 300, hidden 64, 2 layers, 4 heads / 2 KV heads of 16), seeded bf16 weights.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/config.h"
#include "model/safetensors_writer.h"
#include "model/test_support.h"

namespace ditto {

// family: "qwen3" (tied head) or "llama" (biases, llama3 rope scaling, untied head).
// Returns the directory.
inline std::string write_tiny_model(const testing::TempDir& dir, const std::string& family) {
  nlohmann::json c = {{"vocab_size", 300},         {"hidden_size", 64},       {"intermediate_size", 96},
                      {"num_hidden_layers", 2},    {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"head_dim", 16},            {"rms_norm_eps", 1e-6},    {"max_position_embeddings", 4096},
                      {"hidden_act", "silu"},      {"torch_dtype", "bfloat16"}};
  if (family == "qwen3") {
    c["architectures"] = {"Qwen3ForCausalLM"};
    c["model_type"] = "qwen3";
    c["rope_theta"] = 1000000.0;
    c["tie_word_embeddings"] = true;
  } else {  // llama with biases, llama3 rope scaling and an untied head
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
    c["rope_theta"] = 500000.0;
    c["attention_bias"] = true;
    c["mlp_bias"] = true;
    c["tie_word_embeddings"] = false;
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  }
  dir.write("config.json", c.dump());
  const ModelConfig config = parse_model_config(c, "config.json");
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.15f);
  std::vector<std::pair<SafetensorsEntry, std::vector<uint8_t>>> tensors;
  for (const TensorSpec& spec : expected_tensors(config)) {
    SafetensorsEntry e{spec.name, DType::kBF16, spec.shape};
    std::vector<uint8_t> bytes(e.nbytes());
    auto* h = reinterpret_cast<uint16_t*>(bytes.data());
    const bool is_norm = spec.name.find("norm.weight") != std::string::npos;
    for (size_t i = 0; i < bytes.size() / 2; ++i)
      h[i] = f32_to_bf16(is_norm ? 1.0f + normal(rng) : normal(rng));
    tensors.emplace_back(e, std::move(bytes));
  }
  write_safetensors(dir.file("model.safetensors"), tensors);
  return dir.path().string();
}


}  // namespace ditto
